package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/memory"
)

// t0 is 2026-01-01T00:00:00Z, the start of a window of any length that
// divides a day.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestConformance runs the limiter's behaviour suite on a memory store.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Instance {
			s := memory.New()
			t.Cleanup(func() { s.Close() })
			return storetest.Instance{
				Store: s,
				// No other process reaches this store's data: the one
				// handle on it is the store itself, which the suite's
				// tests of a second handle then share between their
				// goroutines.
				Another: func(*testing.T) limiter.Store { return s },
				Stored: func(_ *testing.T, p limiter.Policy, key string, start time.Time) (int64, []storetest.Audit) {
					return memory.Stored(s, p, key, start)
				},
				Expire: func(t *testing.T, now, auditBefore time.Time) {
					if _, err := s.Prune(context.Background(), now, auditBefore); err != nil {
						t.Fatal(err)
					}
				},
			}
		},
		// Broken is nil: the store's data is in the process, never out of
		// its reach.
	})
}

// TestManyGoroutinesOnOneKeyCountExactly: goroutines deciding at once on
// one key are counted one after another. Every attempt is counted, each
// sees a count of its own (1 to the number of attempts, each once), the
// limit lets exactly min(attempts, limit) through, and the audit records
// are exactly those of the attempts that were let through.
func TestManyGoroutinesOnOneKeyCountExactly(t *testing.T) {
	const goroutines, each = 32, 25
	const attempts = goroutines * each
	for _, tt := range []struct {
		name string
		p    limiter.Policy
	}{
		{"a fixed window's limit below the attempts", limiter.Policy{Name: "ping", Limit: 300, Window: time.Hour}},
		{"a sliding window's limit below the attempts", limiter.Policy{Name: "ping", Limit: 300, Window: time.Hour, Algorithm: limiter.Sliding}},
		{"a limit above the attempts", limiter.Policy{Name: "ping", Limit: 1000, Window: time.Hour}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := memory.New()
			defer s.Close()
			var mu sync.Mutex
			var allowed []string
			var counts []int64
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range each {
						id := fmt.Sprintf("g%d-%d", g, i)
						o, err := s.Allow(context.Background(), storetest.One(tt.p, "hot", t0, "GET /ping", id))
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						counts = append(counts, o.Decisions[0].Count)
						if o.Allowed {
							allowed = append(allowed, id)
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			count, audit := memory.Stored(s, tt.p, "hot", t0)
			if want := min(attempts, tt.p.Limit); int64(len(allowed)) != want || count != attempts || len(audit) != len(allowed) {
				t.Errorf("allowed %d, stored count %d, %d audit records; want %d, %d, %d", len(allowed), count, len(audit), want, attempts, want)
			}
			slices.Sort(counts)
			for i, c := range counts {
				if c != int64(i+1) {
					t.Fatalf("the attempts saw counts %v..., want each of 1 to %d once", counts[:i+1], attempts)
				}
			}
			var audited []string
			for _, a := range audit {
				audited = append(audited, a.RequestID)
			}
			slices.Sort(allowed)
			slices.Sort(audited)
			if !slices.Equal(audited, allowed) {
				t.Errorf("audit records of %v, want those of the allowed attempts, %v", audited, allowed)
			}
		})
	}
}

// TestACountSaturates: the windows count denied attempts too, so a client
// denied long enough at a large cost drives its count up without bound; it
// stops at decide.CountCap, and denies.
func TestACountSaturates(t *testing.T) {
	s := memory.New()
	p := limiter.Policy{Name: "ping", Limit: limiter.MaxLimit, Window: time.Hour}
	a := limiter.Attempt{Charges: []limiter.Charge{{Policy: p, Key: "k", Cost: limiter.MaxLimit}}, Now: t0}
	most := decide.CountCap/limiter.MaxLimit + 2 // attempts enough to pass the cap
	for i := range most {
		o, err := s.Allow(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		if d := o.Decisions[0]; d.Count < 0 || d.Count > decide.CountCap || d.Allowed != (i == 0) {
			t.Fatalf("attempt %d: allowed %v, count %d; want only the first allowed, counts up to %d", i+1, d.Allowed, d.Count, int64(decide.CountCap))
		}
	}
	if count, _ := memory.Stored(s, p, "k", t0); count != decide.CountCap {
		t.Errorf("count %d after %d attempts of %d, want it stopped at %d", count, most, int64(limiter.MaxLimit), int64(decide.CountCap))
	}
}

// TestPruneReportsWhatItDeleted: Prune deletes expired windows, drained
// buckets and old audit records, says how many of each, and keeps the
// rest; pruning again deletes nothing.
func TestPruneReportsWhatItDeleted(t *testing.T) {
	s := memory.New()
	ctx := context.Background()
	ping := limiter.Policy{Name: "ping", Limit: 10, Window: time.Minute}
	gcra := limiter.Policy{Name: "tokens", Limit: 10, Window: 10 * time.Second, Namespace: "tokens", Algorithm: limiter.GCRA} // T = 1 s
	// The latest first: a decision a minute after the store's last sweep
	// sweeps (TestAStoreForgetsWhatNoLongerMatters), and this test is
	// Prune's.
	for _, a := range []limiter.Attempt{
		storetest.One(gcra, "full", t0.Add(2*time.Minute+500*time.Millisecond), "", "4"), // TAT 500 ms after now
		storetest.One(ping, "old", t0, "", "1"),                                          // ends at t0+1m: expired at t0+2m+1s
		storetest.One(ping, "live", t0.Add(time.Minute), "", "2"),                        // the window before now's: kept
		storetest.One(gcra, "drained", t0, "", "3"),                                      // TAT t0+1s
	} {
		if _, err := s.Allow(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.SetOverride(ctx, ping, "old", limiter.Override{Limit: 20}); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(2*time.Minute + 1*time.Second)
	got, err := s.Prune(ctx, now, t0.Add(time.Minute))
	if want := (limiter.Pruned{Windows: 1, Buckets: 1, Audit: 2}); err != nil || got != want {
		t.Errorf("prune = %+v, %v; want %+v: the old window, the drained bucket, the records of \"old\" and \"drained\"", got, err, want)
	}
	if got, err := s.Prune(ctx, now, t0.Add(time.Minute)); err != nil || got != (limiter.Pruned{}) {
		t.Errorf("pruning again = %+v, %v; want nothing deleted", got, err)
	}
	if count, audit := memory.Stored(s, ping, "live", t0.Add(time.Minute)); count != 1 || len(audit) != 1 {
		t.Errorf("the live window: count %d, %d audit records; want 1 and 1", count, len(audit))
	}
	if u, err := s.Usage(ctx, gcra, "full", now); err != nil || u.Remaining != gcra.Capacity()-1 {
		t.Errorf("the bucket that has not drained: %+v, %v; want one in use", u, err)
	}
	if o, err := s.Override(ctx, ping, "old"); err != nil || o == nil || o.Limit != 20 {
		t.Errorf("the override after pruning = %+v, %v; want it kept", o, err)
	}
}

// TestAStoreForgetsWhatNoLongerMatters: a store that nobody prunes, as a
// program guarding its routes with memory.New() runs it, holds the
// counters, buckets and audit records of its last minutes, not of every
// window and request it ever decided. It used to keep them all, about 140
// bytes an allowed request, until Prune: 27 MB after 200,000 requests.
func TestAStoreForgetsWhatNoLongerMatters(t *testing.T) {
	s := memory.New()
	ctx := context.Background()
	ping := limiter.Policy{Name: "ping", Limit: 1000, Window: time.Minute}
	gcra := limiter.Policy{Name: "tokens", Limit: 1000, Window: time.Minute, Namespace: "tokens", Algorithm: limiter.GCRA}
	at := t0
	for minute := range 300 {
		for i := range 100 {
			at = t0.Add(time.Duration(minute)*time.Minute + time.Duration(i)*500*time.Millisecond)
			key := fmt.Sprintf("k%d", (minute*100+i)%1000)
			if _, err := s.Allow(ctx, storetest.One(ping, key, at, "", "r")); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Allow(ctx, storetest.One(gcra, "g"+key, at, "", "r")); err != nil {
				t.Fatal(err)
			}
		}
	}
	// At most the windows of the last three minutes (the current one, the
	// one before it that a sliding decision reads, and one not yet swept),
	// 100 keys each; their audit records; the buckets of the last minute
	// and a half.
	windows, buckets, audit := memory.Held(s)
	if windows > 300 || buckets > 200 || audit > 2*300*100 {
		t.Errorf("after 300 minutes of 200 decisions: %d windows, %d buckets, %d audit records held; want those of the last minutes only", windows, buckets, audit)
	}
	// What still matters is there: the last window's count and records.
	last := decide.WindowStart(at, time.Minute)
	if count, records := memory.Stored(s, ping, "k999", last); count != 1 || len(records) != 1 {
		t.Errorf("the last window of k999: count %d, %d audit records; want 1 and 1", count, len(records))
	}
	if count, records := memory.Stored(s, ping, "k0", t0); count != 0 || len(records) != 0 {
		t.Errorf("the first window: count %d, %d audit records; want it forgotten", count, len(records))
	}
}

// TestOneDecisionFarAheadSweepsNothingLive: the sweep goes by the
// decisions' clock, which callers give (Request.At, a clock that steps):
// a decision or two hours ahead do not forget the live counters of the
// others (it used to: alice, denied, was let through again), a clock that
// steps back does not stop the sweeping (it used to, for as long as the
// step), and neither leaves the store to grow without it; a clock that
// keeps stepping back and forth does not make every decision a sweep of
// everything (every third was, holding the store's mutex).
func TestOneDecisionFarAheadSweepsNothingLive(t *testing.T) {
	s := memory.New()
	ctx := context.Background()
	p := limiter.Policy{Name: "api", Limit: 2, Window: time.Hour}
	allow := func(key string, at time.Time) bool {
		t.Helper()
		o, err := s.Allow(ctx, storetest.One(p, key, at, "", "r"))
		if err != nil {
			t.Fatal(err)
		}
		return o.Allowed
	}
	for i, want := range []bool{true, true, false} {
		if got := allow("alice", t0.Add(time.Duration(i)*time.Second)); got != want {
			t.Fatalf("alice %d: %v, want %v", i+1, got, want)
		}
	}
	allow("bob", t0.Add(10*365*24*time.Hour))
	allow("bob", t0.Add(10*365*24*time.Hour))
	if allow("alice", t0.Add(5*time.Second)) {
		t.Errorf("alice, in the window she was denied in, after two decisions ten years ahead: allowed, want denied")
	}
	// A day back, then ten hours of decisions: swept as they go.
	s2 := memory.New()
	at := t0.Add(24 * time.Hour)
	if _, err := s2.Allow(ctx, storetest.One(p, "k", at, "", "r")); err != nil {
		t.Fatal(err)
	}
	for m := range 600 {
		at = t0.Add(time.Duration(m) * time.Minute)
		for k := range 10 {
			if _, err := s2.Allow(ctx, storetest.One(p, fmt.Sprintf("k%d", k), at, "", "r")); err != nil {
				t.Fatal(err)
			}
		}
	}
	if windows, _, _ := memory.Held(s2); windows > 40 {
		t.Errorf("after a step back of a day and ten hours of 10 keys: %d windows held, want those of the last hours only", windows)
	}
	s3 := memory.New()
	for k := range 20000 {
		if _, err := s3.Allow(ctx, storetest.One(p, fmt.Sprintf("k%d", k), t0, "", "r")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		at := t0.Add(time.Duration(i) * time.Second)
		if i%3 == 0 {
			at = at.Add(-24 * time.Hour)
		}
		if _, err := s3.Allow(ctx, storetest.One(p, "late", at, "", "r")); err != nil {
			t.Fatal(err)
		}
	}
	if n := memory.Sweeps(s3); n > 2 {
		t.Errorf("300 decisions on a clock stepping a day back and forth: %d sweeps of 20,000 counters, want at most 2", n)
	}
}

// TestAClosedStoreFailsEveryCall: after Close, every call fails and says
// the store is closed, with an error that is not ErrUnavailable: it will
// not clear by itself, and the process should stop rather than answer
// with its fail mode. Before, the store is ready.
func TestAClosedStoreFailsEveryCall(t *testing.T) {
	s := memory.New()
	ctx := context.Background()
	p := limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("ready = %v, want nil", err)
	}
	if _, err := s.Allow(ctx, storetest.One(p, "k", t0, "", "")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"Ready": func() error { return s.Ready(ctx) },
		"Allow": func() error { _, err := s.Allow(ctx, storetest.One(p, "k", t0, "", "")); return err },
		"Usage": func() error { _, err := s.Usage(ctx, p, "k", t0); return err },
		"Prune": func() error { _, err := s.Prune(ctx, t0, t0); return err },
		"SetOverride": func() error {
			_, err := s.SetOverride(ctx, p, "k", limiter.Override{Limit: 5})
			return err
		},
		"Override":       func() error { _, err := s.Override(ctx, p, "k"); return err },
		"DeleteOverride": func() error { _, err := s.DeleteOverride(ctx, p, "k"); return err },
		"Reset":          func() error { return s.Reset(ctx, p, "k", t0) },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, memory.ErrClosed) || errors.Is(err, limiter.ErrUnavailable) {
			t.Errorf("%s after Close = %v, want %v", name, err, memory.ErrClosed)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("closing again = %v, want nil", err)
	}
}

// TestAnEndedContextCountsNothing: a call whose context has ended reads
// and writes nothing, and says why.
func TestAnEndedContextCountsNothing(t *testing.T) {
	s := memory.New()
	p := limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Allow(ctx, storetest.One(p, "k", t0, "", "")); !errors.Is(err, context.Canceled) {
		t.Errorf("allow with an ended context = %v, want %v", err, context.Canceled)
	}
	if count, audit := memory.Stored(s, p, "k", t0); count != 0 || len(audit) != 0 {
		t.Errorf("counted %d with %d audit records", count, len(audit))
	}
}

// TestTheZeroValueIsAnEmptyStore: a Store declared, not made by New,
// decides as one made by New does.
func TestTheZeroValueIsAnEmptyStore(t *testing.T) {
	var s memory.Store
	p := limiter.Policy{Name: "ping", Limit: 1, Window: time.Minute}
	for i, want := range []bool{true, false} {
		o, err := s.Allow(context.Background(), storetest.One(p, "k", t0, "", fmt.Sprint(i)))
		if err != nil || o.Allowed != want {
			t.Errorf("attempt %d: %+v, %v; want allowed %v", i+1, o, err, want)
		}
	}
}
