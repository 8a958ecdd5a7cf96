package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// TestABatchDecidesInBulkAsOneByOne decides one seeded sequence of
// batches on two stores: on one as the batches they are, so that runs of
// window checks are decided in bulk (bulk.go), on the other one attempt at
// a time. Every outcome, every count and every audit record (in order)
// must be the same. The batches repeat keys within a run (the counts
// RETURNING gives a key must go to its attempts in order), mix policies
// that share a window with ones that do not, attempts of two charges,
// GCRA and costs of 2 (decided alone between runs), overrides set and
// removed, and cross window edges within a batch, the clock now and then
// going back a little.
func TestABatchDecidesInBulkAsOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bulk, alone := bulkAndAlone(t)
	policies := []limiter.Policy{
		{Name: "s", Limit: 5, Window: time.Minute, Algorithm: limiter.Sliding},
		{Name: "s2", Namespace: "s2", Limit: 7, Window: time.Minute, Algorithm: limiter.Sliding},
		{Name: "f", Namespace: "f", Limit: 3, Window: time.Minute},
		{Name: "h", Namespace: "h", Limit: 4, Window: time.Hour},
		{Name: "g", Namespace: "g", Limit: 2, Window: 10 * time.Second, Algorithm: limiter.GCRA, Burst: 2},
	}
	keys := []string{"a", "b", "c", "d", "e"}
	r := rand.New(rand.NewPCG(7, 11))
	now := time.Date(2026, 12, 6, 9, 59, 0, 0, time.UTC)
	id := 0
	attempt := func() limiter.Attempt {
		id++
		key := keys[r.IntN(len(keys))]
		charge := func(p limiter.Policy) limiter.Charge { return limiter.Charge{Policy: p, Key: key} }
		a := limiter.Attempt{Now: now.Add(time.Duration(r.IntN(1000)-500) * time.Millisecond), Route: "GET /x", RequestID: fmt.Sprint(id)}
		switch n := r.IntN(20); {
		case n < 9:
			a.Charges = []limiter.Charge{charge(policies[0])}
		case n < 11:
			a.Charges = []limiter.Charge{charge(policies[0]), charge(policies[1])} // one window: in bulk
		case n < 13:
			a.Charges = []limiter.Charge{charge(policies[2])}
		case n < 14:
			a.Charges = []limiter.Charge{charge(policies[3])}
		case n < 15:
			a.Charges = []limiter.Charge{charge(policies[0]), charge(policies[3])} // two windows: alone
		case n < 17:
			a.Charges = []limiter.Charge{charge(policies[4])}
		default:
			c := charge(policies[0])
			c.Cost = 2
			a.Charges = []limiter.Charge{c}
		}
		return a
	}
	for round := range 300 {
		now = now.Add(time.Duration(r.IntN(8000)) * time.Millisecond)
		if r.IntN(4) == 0 {
			// On a minute's edge: the batch's attempts, up to half a
			// second either side, count in two windows of each policy.
			now = now.Truncate(time.Minute).Add(time.Minute)
		}
		if r.IntN(10) == 0 {
			p, key, set := policies[r.IntN(3)], keys[r.IntN(len(keys))], r.IntN(3)
			for _, s := range []*Store{bulk, alone} {
				var err error
				switch set {
				case 0:
					_, err = s.SetOverride(ctx, p, key, limiter.Override{Limit: int64(1 + round%9)})
				case 1:
					// As a GCRA policy of the same name set it before a
					// reload made it a window: its limit applies, its
					// burst does not.
					g := p
					g.Algorithm, g.Burst = limiter.GCRA, 1
					_, err = s.SetOverride(ctx, g, key, limiter.Override{Limit: int64(1 + round%9), Burst: int64(1 + round%3)})
				default:
					_, err = s.DeleteOverride(ctx, p, key)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		var as []limiter.Attempt
		for range 1 + r.IntN(12) {
			as = append(as, attempt())
		}
		sameOutcomes(t, round, bulk, alone, as)
	}
	if bulk.shards[0].batch.bulked.Load() < 500 {
		t.Fatalf("only %d attempts were decided in bulk: the test did not test it", bulk.shards[0].batch.bulked.Load())
	}
	sameRows(t, bulk, alone)
}

// sameOutcomes decides as in one batch on bulk, and each alone on alone,
// and fails t (in the round-th batch) unless every outcome is the same.
func sameOutcomes(t *testing.T, round int, bulk, alone *Store, as []limiter.Attempt) {
	t.Helper()
	got := decideAll(t, bulk, as)
	for i, a := range as {
		o := decideAll(t, alone, []limiter.Attempt{a})
		if !reflect.DeepEqual(got[i], o[0]) {
			t.Fatalf("round %d, attempt %d of %d (%+v):\nin bulk  %+v\none by one %+v", round, i, len(as), a, got[i], o[0])
		}
	}
}

// bulkAndAlone opens two new stores: one to decide batches on (in bulk),
// one to decide their attempts one at a time on.
func bulkAndAlone(t *testing.T) (bulk, alone *Store) {
	t.Helper()
	open := func(name string) *Store {
		s, err := Open(context.Background(), Config{Path: filepath.Join(t.TempDir(), name)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Ready(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	return open("bulk.db"), open("alone.db")
}

// sameRows fails t unless bulk and alone hold the same counters, audit
// records (in order) and GCRA buckets.
func sameRows(t *testing.T, bulk, alone *Store) {
	t.Helper()
	for _, q := range []string{
		"SELECT key, window_start, count, window_seconds FROM rate_limit_windows ORDER BY key, window_start",
		"SELECT key, window_start, called_at, route, request_id, cost FROM api_calls ORDER BY id",
		"SELECT key, tat, emission FROM gcra_buckets ORDER BY key",
	} {
		b, a := dump(t, bulk, q), dump(t, alone, q)
		if reflect.DeepEqual(b, a) {
			continue
		}
		t.Errorf("%s: %d rows in bulk, %d one by one", q, len(b), len(a))
		for i := range min(len(a), len(b)) {
			if a[i] != b[i] {
				t.Errorf("first that differs, row %d:\nin bulk    %s\none by one %s", i, b[i], a[i])
				break
			}
		}
	}
}

// decideAll decides as in one batch of s's one shard, as its leader would.
func decideAll(t *testing.T, s *Store, as []limiter.Attempt) []any {
	t.Helper()
	batch := make([]*pending, len(as))
	for i, a := range as {
		batch[i] = newPending(context.Background(), a, false)
	}
	outs, err := s.shards[0].decideBatch(batch)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]any, len(outs))
	for i, o := range outs {
		got[i] = o
	}
	return got
}

// dump is every row q reads from s's one shard, as text.
func dump(t *testing.T, s *Store, q string) []string {
	t.Helper()
	h, err := s.shards[0].acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.shards[0].release(h)
	rows, err := h.db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []string
	for rows.Next() {
		v := make([]any, len(cols))
		p := make([]any, len(cols))
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(v...))
	}
	return out
}
