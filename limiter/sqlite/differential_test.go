package sqlite_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/memory"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// TestDecidesAsTheMemoryStore replays one seeded sequence of attempts,
// overrides set and removed, and resets on the memory store and on SQLite
// stores of one and of four shards, and compares every answer: the
// decisions (allowed, count, remaining, reset, retry-after), refusals, and
// Usage afterwards. The attempts mix what takes countSQL's one statement
// (window checks of one unit) with what is read first (GCRA, costs of 2,
// two windows of two lengths on one store key), across window edges (the
// clock now and then going back a little, as hosts' clocks differ), on
// keys of one shard and of several.
func TestDecidesAsTheMemoryStore(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= diffSeeds(); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			replay(t, seed, 400)
		})
	}
}

var diffPolicies = []limiter.Policy{
	{Name: "ping", Limit: 3, Window: 2 * time.Second},
	{Name: "plain", Limit: 4, Window: 3 * time.Second, Algorithm: limiter.Sliding},
	{Name: "slide", Limit: 5, Window: 2 * time.Second, Algorithm: limiter.Sliding, Namespace: "slide",
		Tiers: map[string]limiter.Tier{"gold": {Limit: 9}, "tiny": {Limit: 1}}},
	{Name: "fixed", Limit: 2, Window: 4 * time.Second, Namespace: "fixed", Tiers: map[string]limiter.Tier{"gold": {Limit: 6}}},
	{Name: "slide2", Limit: 3, Window: 4 * time.Second, Algorithm: limiter.Sliding, Namespace: "slide"}, // one counter with "slide"
	{Name: "bucket", Limit: 4, Window: 4 * time.Second, Algorithm: limiter.GCRA, Burst: 2, Namespace: "bucket"},
	{Name: "shadow", Limit: 1, Window: 2 * time.Second, Algorithm: limiter.Sliding, Namespace: "shadow", Shadow: true},
	{Name: "one", Limit: 1, Window: time.Second, Algorithm: limiter.Sliding, Namespace: "one", Tiers: map[string]limiter.Tier{"gold": {Limit: 2}}},
	{Name: "hour", Limit: 40, Window: time.Hour, Namespace: "fixed"},                                  // one counter with "fixed", 4 s windows
	{Name: "edge", Limit: 3, Window: 2 * time.Second, Namespace: "slide"},                             // "slide"'s counter, fixed
	{Name: "bucket2", Limit: 3, Window: 2 * time.Second, Algorithm: limiter.GCRA, Namespace: "fixed"}, // "fixed"'s overrides
}

var diffKeys = []string{"alice", "bob", "carol", "k0", "k1", "k4"}

// diffStores are the stores compared, by name.
type diffStores struct {
	names  []string
	stores []limiter.Store
}

func replay(t *testing.T, seed uint64, steps int) {
	r := rand.New(rand.NewPCG(seed, 7))
	ss := diffStores{names: []string{"memory", "sqlite", "sqlite x4"}, stores: []limiter.Store{
		memory.New(), sqlitetest.Open(t, storeConfig("")), sqlitetest.Open(t, shardedConfig("", 4)),
	}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	var allowed []string // request IDs, in order
	for step := range steps {
		// Mostly forward, a window or more at times, and now and then
		// back a little: the clocks of the hosts that share a store differ.
		switch n := r.IntN(40); {
		case n == 0:
			now = now.Add(time.Duration(r.IntN(10)) * time.Second)
		case n < 4:
			now = now.Add(-time.Duration(r.IntN(1500)) * time.Millisecond)
		default:
			now = now.Add(time.Duration(r.IntN(1500)) * time.Millisecond)
		}
		p, key := diffPolicies[r.IntN(len(diffPolicies))], diffKeys[r.IntN(len(diffKeys))]
		var what string
		var results []any
		switch n := r.IntN(20); {
		case n == 0:
			o := limiter.Override{Limit: 1 + r.Int64N(3)}
			what = fmt.Sprintf("set override %+v of %s on %s", o, p.Name, key)
			results = ss.each(func(s limiter.Store) any { b, err := s.SetOverride(ctx, p, key, o); return fmt.Sprint(b, errText(err)) })
		case n == 1:
			what = fmt.Sprintf("delete override of %s on %s", p.Name, key)
			results = ss.each(func(s limiter.Store) any { b, err := s.DeleteOverride(ctx, p, key); return fmt.Sprint(b, errText(err)) })
		case n == 2:
			what = fmt.Sprintf("reset %s on %s", p.Name, key)
			results = ss.each(func(s limiter.Store) any { return errText(s.Reset(ctx, p, key, now)) })
		case n == 3:
			what = fmt.Sprintf("usage of %s on %s", p.Name, key)
			results = ss.each(func(s limiter.Store) any { u, err := s.Usage(ctx, p, key, now); return fmt.Sprint(u, errText(err)) })
		default:
			a := randomAttempt(r, now, step)
			what = fmt.Sprintf("attempt %s", describe(a))
			results = ss.each(func(s limiter.Store) any { o, err := s.Allow(ctx, a); return fmt.Sprint(o, errText(err)) })
			if isAllowed(results[0].(string)) {
				allowed = append(allowed, a.RequestID)
			}
		}
		for i := 1; i < len(results); i++ {
			if !reflect.DeepEqual(results[0], results[i]) {
				t.Fatalf("step %d at %s: %s:\n%s: %v\n%s: %v", step, now.Format("15:04:05.000"), what, ss.names[0], results[0], ss.names[i], results[i])
			}
		}
	}
	for i, s := range ss.stores[1:] {
		if got := auditIDs(t, s.(*sqlite.Store)); !reflect.DeepEqual(got, allowed) {
			t.Errorf("%s holds the audit records of %v, want those of the %d allowed attempts %v", ss.names[i+1], got, len(allowed), allowed)
		}
	}
}

// isAllowed reads Outcome.Allowed off an outcome as replay prints it.
func isAllowed(printed string) bool { return strings.HasSuffix(printed, "] true}") }

// auditIDs are the request IDs of s's audit records, in every shard, in
// the order they were made (request IDs are r<step>).
func auditIDs(t *testing.T, s *sqlite.Store) []string {
	var ids []string
	for _, p := range s.Paths() {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			continue // a shard no call needed
		}
		rows, err := sqlitetest.Inspect(t, p).Query(`SELECT request_id FROM api_calls`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(len(a), len(b))*2 + cmp.Compare(a, b) })
	return ids
}

func (ss diffStores) each(f func(limiter.Store) any) []any {
	out := make([]any, len(ss.stores))
	for i, s := range ss.stores {
		out[i] = f(s)
	}
	return out
}

// randomAttempt is one to three charges, of costs 0 to 2, under tiers
// named or not, on one key or on several.
func randomAttempt(r *rand.Rand, now time.Time, step int) limiter.Attempt {
	a := limiter.Attempt{Now: now, Route: "GET /x", RequestID: fmt.Sprint("r", step)}
	key := diffKeys[r.IntN(len(diffKeys))]
	for range 1 + r.IntN(3) {
		c := limiter.Charge{Policy: diffPolicies[r.IntN(len(diffPolicies))], Key: key}
		if r.IntN(3) == 0 {
			c.Key = diffKeys[r.IntN(len(diffKeys))]
		}
		switch r.IntN(6) {
		case 0:
			c.Cost = 0
		case 1:
			c.Cost = 2
		default:
			c.Cost = 1
		}
		c.Tier = []string{"", "", "gold", "tiny", "none"}[r.IntN(5)]
		a.Charges = append(a.Charges, c)
	}
	return a
}

func describe(a limiter.Attempt) string {
	s := ""
	for _, c := range a.Charges {
		s += fmt.Sprintf("[%s %s cost %d tier %q] ", c.Policy.Name, c.Key, c.Cost, c.Tier)
	}
	return s
}

// errText is err's text without the store's name, or "".
func errText(err error) string {
	if err == nil {
		return ""
	}
	var re *limiter.RequestError
	if errors.As(err, &re) {
		return fmt.Sprint(re.Kind, re.Reason)
	}
	return "error: " + err.Error()
}

func diffSeeds() uint64 {
	if n, err := strconv.ParseUint(os.Getenv("DIFF_SEEDS"), 10, 64); err == nil {
		return n
	}
	return 6
}

// TestBatchesDecideAsOneAfterAnother sends attempts at once, so that they
// share transactions (batch.go), each with a first check that counts every
// attempt on one key in one fixed window: its count is the attempt's place
// in the order the store decided them. Replayed on the memory store in that
// order, every attempt must be decided as it was: an attempt in a batch
// sees exactly the counts of those before it, including another of the
// same batch on the same key, and a refused one counts nothing.
func TestBatchesDecideAsOneAfterAnother(t *testing.T) {
	t.Parallel()
	order := limiter.Policy{Name: "order", Limit: limiter.MaxLimit, Window: time.Hour, Namespace: "order"}
	for seed := uint64(1); seed <= diffSeeds(); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 11))
			s := sqlitetest.Open(t, shardedConfig("", 1+int(seed%2)*3))
			ref := memory.New()
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for _, o := range []struct {
				p   limiter.Policy
				key string
			}{{diffPolicies[2], "alice"}, {diffPolicies[0], "bob"}} {
				for _, st := range []limiter.Store{s, ref} {
					if _, err := st.SetOverride(context.Background(), o.p, o.key, limiter.Override{Limit: 1}); err != nil {
						t.Fatal(err)
					}
				}
			}
			var attempts []limiter.Attempt
			for i := range 48 {
				a := randomAttempt(r, base.Add(time.Duration(r.IntN(6000))*time.Millisecond), i)
				a.Charges = append([]limiter.Charge{{Policy: order, Key: "order"}}, a.Charges...)
				attempts = append(attempts, a)
			}
			type answer struct {
				o   limiter.Outcome
				err error
			}
			answers := make([]answer, len(attempts))
			var wg sync.WaitGroup
			for i, a := range attempts {
				wg.Go(func() {
					o, err := s.Allow(context.Background(), a)
					answers[i] = answer{o, err}
				})
			}
			wg.Wait()
			if st := s.Stats(); st.LargestBatch < 2 {
				t.Logf("no batch of several (%+v): the run shows nothing of batches", st)
			}
			placed := make([]int, 0, len(attempts)) // attempts by their place
			var refused []int
			for i, an := range answers {
				if an.err != nil {
					refused = append(refused, i)
					continue
				}
				placed = append(placed, i)
			}
			slices.SortFunc(placed, func(a, b int) int {
				return cmp.Compare(answers[a].o.Decisions[0].Count, answers[b].o.Decisions[0].Count)
			})
			for n, i := range placed {
				if c := answers[i].o.Decisions[0].Count; c != int64(n+1) {
					t.Fatalf("the decided attempts' places are not 1 to %d: the %dth counted %d", len(placed), n+1, c)
				}
			}
			// The refused attempts counted nothing, so they may take any
			// place: replay them first (the overrides they met never change).
			for _, i := range append(refused, placed...) {
				o, err := ref.Allow(context.Background(), attempts[i])
				if got, want := fmt.Sprint(answers[i].o, errText(answers[i].err)), fmt.Sprint(o, errText(err)); got != want {
					t.Fatalf("attempt %d, %s at %s:\nsqlite: %s\nmemory, in sqlite's order: %s", i, describe(attempts[i]), attempts[i].Now.Format("15:04:05.000"), got, want)
				}
			}
		})
	}
}
