package rejectcache_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/rejectcache"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/memory"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRejectCacheDeniesRepeatOffendersWithoutTheStore(t *testing.T) {
	store := sqlitetest.Open(t, sqlite.Config{})
	c := rejectcache.New(store, 0)
	p := limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}
	ctx := context.Background()
	try := func(at time.Duration) remembered {
		t.Helper()
		o, err := allow(ctx, c, storetest.One(p, "abuser", t0.Add(at), "", ""))
		if err != nil {
			t.Fatal(err)
		}
		return remembered{o.Decisions[0].Decision, o.FromMemory}
	}
	for i := range 3 {
		if d := try(time.Duration(i) * time.Second); !d.Allowed || d.FromMemory {
			t.Fatalf("attempt %d: %+v, want allowed by the store", i+1, d)
		}
	}
	if d := try(10 * time.Second); d.Allowed || d.FromMemory || d.Count != 4 {
		t.Fatalf("4th attempt: %+v, want denied by the store with count 4", d)
	}
	// Twenty more in the same window, within MaxRemembered of the denial:
	// denied from memory, with the right wait, and the store never sees
	// them.
	for i := range 20 {
		at := 10*time.Second + time.Duration(i+1)*rejectcache.MaxRemembered/25
		d := try(at)
		if d.Allowed || !d.FromMemory || d.Remaining != 0 || d.ResetAfter != wholeSeconds(time.Minute-at) || !d.Reset.Equal(t0.Add(time.Minute)) {
			t.Fatalf("attempt at +%v: %+v, want a denial from memory with retry after %v", at, d, wholeSeconds(time.Minute-at))
		}
	}
	if u, _ := store.Usage(ctx, p, "abuser", t0); u.Count != 4 {
		t.Errorf("stored count %d, want 4: the cached denials must not reach the store", u.Count)
	}
	// MaxRemembered after the denial, the store is asked again (an
	// override or a reset made elsewhere would show), and remembered anew.
	if d := try(10*time.Second + rejectcache.MaxRemembered); d.Allowed || d.FromMemory || d.Count != 5 {
		t.Fatalf("%v after the denial: %+v, want denied by the store with count 5", rejectcache.MaxRemembered, d)
	}
	if d := try(10*time.Second + rejectcache.MaxRemembered + time.Second); d.Allowed || !d.FromMemory {
		t.Fatalf("after the second denial: %+v, want a denial from memory", d)
	}
	// The next window asks the store again.
	if d := try(time.Minute); !d.Allowed || d.FromMemory || d.Count != 1 {
		t.Errorf("next window: %+v, want allowed by the store with count 1", d)
	}
	// Other keys are unaffected.
	if o, _ := c.Allow(ctx, storetest.One(p, "polite", t0.Add(30*time.Second), "", "")); !o.Allowed {
		t.Errorf("another key was denied: %+v", o)
	}
}

func TestRejectCacheStaysWithinItsSize(t *testing.T) {
	store := sqlitetest.Open(t, sqlite.Config{})
	c := rejectcache.New(store, 2)
	p := limiter.Policy{Name: "ping", Limit: 1, Window: time.Minute}
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		for range 3 {
			c.Allow(ctx, storetest.One(p, k, t0, "", ""))
		}
	}
	if c.Len() != 2 {
		t.Errorf("remembers %d denials, want at most 2", c.Len())
	}
	// "c" did not fit: each of its denials went to the store.
	if u, _ := store.Usage(ctx, p, "c", t0); u.Count != 3 {
		t.Errorf("c's stored count %d, want 3", u.Count)
	}
	// In a later window the expired denials are swept to make room.
	for range 2 {
		c.Allow(ctx, storetest.One(p, "c", t0.Add(time.Hour), "", ""))
	}
	if c.Len() != 1 {
		t.Errorf("after the sweep it remembers %d denials, want 1 (c's, in the new window)", c.Len())
	}
}

// A denial by a minute's policy is remembered while a one-second policy
// beside it moves through its windows: the store is asked again only when
// the minute ends.
func TestRejectCacheRemembersALongDenialBesideAShortPolicy(t *testing.T) {
	store := sqlitetest.Open(t, sqlite.Config{})
	c := rejectcache.New(store, 0)
	minute := limiter.Policy{Name: "ping", Limit: 2, Window: time.Minute}
	second := limiter.Policy{Name: "burst", Limit: 5, Window: time.Second, Namespace: "burst", Algorithm: limiter.Sliding}
	ctx := context.Background()
	try := func(at time.Duration) decide.Outcome {
		t.Helper()
		a := limiter.Attempt{Charges: []limiter.Charge{{Policy: minute, Key: "k"}, {Policy: second, Key: "k"}}, Now: t0.Add(at)}
		o, err := allow(ctx, c, a)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for i := range 3 {
		try(time.Duration(i) * 100 * time.Millisecond)
	}
	stored := 0 // denials the store made, once every MaxRemembered
	for s := 1; s < 60; s++ {
		o := try(time.Duration(s) * time.Second)
		if o.Allowed || o.Decisions[0].Allowed || !o.Decisions[1].Allowed {
			t.Fatalf("at +%ds: %+v, want denied by ping alone", s, o)
		}
		if !o.FromMemory {
			stored++
		}
		if o.Public().RetryAfter() != time.Duration(60-s)*time.Second {
			t.Fatalf("at +%ds: retry after %v, want %ds", s, o.Public().RetryAfter(), 60-s)
		}
	}
	// Remembered from the denial at 200 ms; asked again at 11, 21, 31, 41
	// and 51 s.
	if want := int(time.Minute/rejectcache.MaxRemembered) - 1; stored != want {
		t.Errorf("the store decided %d of the 59 attempts, want %d: one every %v", stored, want, rejectcache.MaxRemembered)
	}
	if u, _ := store.Usage(ctx, minute, "k", t0); u.Count != int64(3+stored) {
		t.Errorf("stored count %d, want %d: the attempts before the cache and those it let through", u.Count, 3+stored)
	}
	if o := try(time.Minute); !o.Allowed || o.FromMemory {
		t.Errorf("next minute: %+v, want allowed by the store", o)
	}
}

// remembered is a decision, and whether the cache made it from memory.
type remembered struct {
	limiter.Decision
	FromMemory bool
}

// allow is c.Allow, with the whole outcome it reports (decide.Capture).
func allow(ctx context.Context, c *rejectcache.Cache, a limiter.Attempt) (decide.Outcome, error) {
	ctx, whole := decide.Capture(ctx)
	if _, err := c.Allow(ctx, a); err != nil {
		return decide.Outcome{}, err
	}
	return *whole, nil
}

// attemptAt is c's whole outcome for key "k" under p at t0+at, at cost,
// with request id id; an error fails t with t.Error, which another
// goroutine may call.
func attemptAt(t *testing.T, c *rejectcache.Cache, p limiter.Policy, id string, at time.Duration, cost int64) decide.Outcome {
	t.Helper()
	a := storetest.One(p, "k", t0.Add(at), "", id)
	a.Charges[0].Cost = cost
	o, err := allow(context.Background(), c, a)
	if err != nil {
		t.Error(err)
	}
	return o
}

// wholeSeconds rounds d up to whole seconds, as waits are told.
func wholeSeconds(d time.Duration) time.Duration { return (d + time.Second - 1).Truncate(time.Second) }

// countingStore counts the attempts that reach the store.
type countingStore struct {
	limiter.Store
	mu sync.Mutex
	n  int
}

func (s *countingStore) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	s.mu.Lock()
	s.n++
	s.mu.Unlock()
	return s.Store.Allow(ctx, a)
}

// TestRejectCacheUnderConcurrency: sixteen clients of one process hammer a
// key with a limit of 3. Attempts already on their way to the store when
// the first denial comes back reach it too, so the store sees at most the
// limit plus one attempt per client, not one per attempt: the rule
// docs/configuration.md states (REJECT_CACHE).
func TestRejectCacheUnderConcurrency(t *testing.T) {
	counted := &countingStore{Store: sqlitetest.Open(t, sqlite.Config{})}
	c := rejectcache.New(counted, 0)
	p := limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}
	const clients, each = 16, 20
	var wg sync.WaitGroup
	var allowed atomic.Int64
	for range clients {
		wg.Go(func() {
			for range each {
				o, err := c.Allow(context.Background(), storetest.One(p, "hot", t0, "", ""))
				if err != nil {
					t.Error(err)
					return
				}
				if o.Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 3 {
		t.Errorf("%d allowed, want 3", allowed.Load())
	}
	if counted.n > 3+clients || counted.n < 4 {
		t.Errorf("%d of %d attempts reached the store, want from 4 to %d: the limit plus at most one per client", counted.n, clients*each, 3+clients)
	}
	if u, _ := counted.Usage(context.Background(), p, "hot", t0); u.Count != int64(counted.n) {
		t.Errorf("stored count %d, want %d: what reached the store", u.Count, counted.n)
	}
}

// heldStore holds each denial's answer until released: a decision in
// flight while something else happens.
type heldStore struct {
	limiter.Store
	denied, release chan struct{}
}

func (s *heldStore) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	o, err := s.Store.Allow(ctx, a)
	if err == nil && !o.Allowed {
		s.denied <- struct{}{}
		<-s.release
	}
	return o, err
}

// TestRejectCacheForgetsADenialThatCrossedAReset: a denial the store made
// before a reset, answered after the reset forgot the key, is not
// remembered: the reset key's next attempt goes to the store and passes,
// where it used to be denied from memory for up to MaxRemembered.
func TestRejectCacheForgetsADenialThatCrossedAReset(t *testing.T) {
	ctx := context.Background()
	store := sqlitetest.Open(t, sqlite.Config{})
	p := limiter.Policy{Name: "ping", Limit: 1, Window: time.Minute}
	if o, err := store.Allow(ctx, storetest.One(p, "k", t0, "", "")); err != nil || !o.Allowed {
		t.Fatalf("first: %+v, %v", o, err)
	}
	held := &heldStore{Store: store, denied: make(chan struct{}), release: make(chan struct{})}
	c := rejectcache.New(held, 0)
	done := make(chan error)
	go func() {
		_, err := c.Allow(ctx, storetest.One(p, "k", t0, "", ""))
		done <- err
	}()
	<-held.denied // decided, not yet answered
	if err := c.Reset(ctx, p, "k", t0); err != nil {
		t.Fatal(err)
	}
	close(held.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c.Len() != 0 {
		t.Errorf("%d denials remembered across the reset", c.Len())
	}
	if o, err := allow(ctx, c, storetest.One(p, "k", t0.Add(time.Second), "", "")); err != nil || !o.Allowed || o.FromMemory {
		t.Errorf("after the reset: %+v, %v; want allowed by the store", o, err)
	}
}

// TestAKeyThatChangesTierIsAskedAgain: a key denied on the free tier
// (limit 2) and remembered is denied from memory while it stays free;
// once its requests name pro (limit 5), the store decides them under
// pro's limit, where the remembered free denial would have turned them
// away. A tier the policy does not list is the free one's.
func TestAKeyThatChangesTierIsAskedAgain(t *testing.T) {
	store := sqlitetest.Open(t, sqlite.Config{})
	c := rejectcache.New(store, 0)
	p := limiter.Policy{Name: "ping", Limit: 2, Window: time.Minute, Tiers: map[string]limiter.Tier{"pro": {Limit: 5}}}
	ctx := context.Background()
	try := func(tier string) remembered {
		t.Helper()
		a := storetest.One(p, "upgrader", t0, "", "")
		a.Charges[0].Tier = tier
		o, err := allow(ctx, c, a)
		if err != nil {
			t.Fatal(err)
		}
		return remembered{o.Decisions[0].Decision, o.FromMemory}
	}
	for range 2 {
		try("")
	}
	if d := try(""); d.Allowed || d.FromMemory {
		t.Fatalf("3rd on free: %+v, want denied by the store", d)
	}
	if d := try("unlisted"); d.Allowed || !d.FromMemory {
		t.Errorf("a tier not listed: %+v, want the free tier's denial from memory", d)
	}
	if d := try("pro"); !d.Allowed || d.FromMemory || d.Tier != "pro" || d.Count != 4 || d.Policy.Limit != 5 {
		t.Errorf("on pro: %+v, want allowed by the store under pro's 5, at count 4 (the denial from memory was not counted)", d)
	}
}

// TestACheaperRequestThatPassesIsNotForgotten is the tester's case: GCRA, 3
// per 6 s; a cost of 3 passes, a second is denied (and remembered); 2 s
// later a cost of 1 passes, through the store, moving the bucket; a cost
// of 3 then must be told the wait from the bucket as it is, not as the
// remembered denial left it. It used to be denied from memory with a wait
// of 4 s, and denied again when it came back then.
func TestACheaperRequestThatPassesIsNotForgotten(t *testing.T) {
	store := sqlitetest.Open(t, sqlite.Config{})
	c := rejectcache.New(store, 0)
	p := limiter.Policy{Name: "tokens", Limit: 3, Window: 6 * time.Second, Namespace: "tokens", Algorithm: limiter.GCRA}
	try := func(at time.Duration, cost int64) decide.Outcome { return attemptAt(t, c, p, "", at, cost) }
	if o := try(0, 3); !o.Allowed {
		t.Fatalf("the first cost of 3: %+v, want allowed", o)
	}
	if o := try(0, 3); o.Allowed {
		t.Fatalf("the second cost of 3: %+v, want denied", o)
	}
	if o := try(2*time.Second+130*time.Millisecond, 1); !o.Allowed {
		t.Fatalf("a cost of 1 at 2.13 s: %+v, want allowed", o)
	}
	o := try(2*time.Second+130*time.Millisecond, 3)
	if o.Allowed {
		t.Fatalf("a cost of 3 at 2.13 s: %+v, want denied", o)
	}
	wait := o.Decisions[0].ResetAfter
	if back := try(2*time.Second+130*time.Millisecond+wait, 3); !back.Allowed {
		t.Errorf("a cost of 3 told to wait %v, back then: %+v (from memory %v), want allowed", wait, back.Decisions[0].Decision, back.FromMemory)
	}
}

// TestAnImpossibleCostIsNotDeniedFromMemory: a key whose override makes a
// cost impossible is refused it (ErrInvalidCost, a 400), not told a wait
// from a remembered denial after which it would be refused all the same.
// It used to be denied from memory, with a retry_after.
func TestAnImpossibleCostIsNotDeniedFromMemory(t *testing.T) {
	store := sqlitetest.Open(t, sqlite.Config{})
	c := rejectcache.New(store, 0)
	p := limiter.Policy{Name: "api", Limit: 5, Window: time.Minute}
	ctx := context.Background()
	if _, err := c.SetOverride(ctx, p, "carol", limiter.Override{Limit: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := allow(ctx, c, storetest.One(p, "carol", t0.Add(time.Duration(i)*time.Second), "", "")); err != nil {
			t.Fatal(err)
		}
	}
	a := storetest.One(p, "carol", t0.Add(4*time.Second), "", "")
	a.Charges[0].Cost = 3
	o, err := allow(ctx, c, a)
	if !errors.Is(err, limiter.ErrInvalidCost) {
		t.Errorf("a cost of 3 under an override of 2: %+v, %v; want ErrInvalidCost", o, err)
	}
}

// gatedStore holds the attempts of cost 1 at its door until open is
// closed, so that a test can order a cheaper attempt's pass after a
// costlier one's denial.
type gatedStore struct {
	limiter.Store
	arrived, open chan struct{}
}

func (s *gatedStore) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	if a.Charges[0].Cost == 1 {
		s.arrived <- struct{}{}
		<-s.open
	}
	return s.Store.Allow(ctx, a)
}

// TestACheaperPassOnItsWayForgetsTheDenial is the tester's race: a cheaper
// attempt is on its way to the store when a costlier one is denied and
// remembered; the cheaper one then passes, moving the bucket. The denial
// is forgotten: the next costlier attempt is told the wait as the bucket
// is. It used to be kept (the cheaper one had found no denial to forget
// when it asked), and its wait was too short.
func TestACheaperPassOnItsWayForgetsTheDenial(t *testing.T) {
	gate := &gatedStore{Store: sqlitetest.Open(t, sqlite.Config{}), arrived: make(chan struct{}), open: make(chan struct{})}
	c := rejectcache.New(gate, 0)
	p := limiter.Policy{Name: "tokens", Limit: 3, Window: 6 * time.Second, Namespace: "tokens", Algorithm: limiter.GCRA}
	try := func(at time.Duration, cost int64) decide.Outcome { return attemptAt(t, c, p, "", at, cost) }
	if o := try(0, 2); !o.Allowed {
		t.Fatalf("a cost of 2 at 0: %+v, want allowed", o)
	}
	done := make(chan decide.Outcome)
	go func() { done <- try(500*time.Millisecond, 1) }()
	<-gate.arrived
	if o := try(500*time.Millisecond, 2); o.Allowed || o.FromMemory {
		t.Fatalf("a cost of 2 at 0.5 s: %+v, want denied by the store", o)
	}
	close(gate.open)
	if o := <-done; !o.Allowed {
		t.Fatalf("the cost of 1 at 0.5 s: %+v, want allowed", o)
	}
	o := try(time.Second, 2)
	if o.Allowed {
		t.Fatalf("a cost of 2 at 1 s: %+v, want denied", o)
	}
	wait := o.Decisions[0].ResetAfter
	if back := try(time.Second+wait, 2); !back.Allowed {
		t.Errorf("a cost of 2 told at 1 s to wait %v (from memory %v), back then: %+v, want allowed", wait, o.FromMemory, back.Decisions[0].Decision)
	}
}

// heldByID holds each attempt named in decided after the store decided
// it, until its release: answers that come back in another order than
// the store decided them.
type heldByID struct {
	limiter.Store
	decided, release map[string]chan struct{}
}

func (s *heldByID) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	o, err := s.Store.Allow(ctx, a)
	if ch, ok := s.decided[a.RequestID]; ok {
		ch <- struct{}{}
		<-s.release[a.RequestID]
	}
	return o, err
}

// TestPassesAnsweredOutOfOrder is the tester's second race: the store
// decides a pass P1, a denial D, a pass P2, and their answers come back
// P2, P1, D. D was decided before P2 and is not remembered. It used to be:
// the slot kept P1, the last to come back, which was before D.
func TestPassesAnsweredOutOfOrder(t *testing.T) {
	p := limiter.Policy{Name: "tokens", Limit: 6, Window: 6 * time.Second, Namespace: "tokens", Algorithm: limiter.GCRA}
	ids := []string{"P1", "D", "P2"}
	st := &heldByID{Store: memory.New(), decided: map[string]chan struct{}{}, release: map[string]chan struct{}{}}
	for _, id := range ids {
		st.decided[id], st.release[id] = make(chan struct{}), make(chan struct{})
	}
	c := rejectcache.New(st, 0)
	try := func(id string, at time.Duration, cost int64) decide.Outcome { return attemptAt(t, c, p, id, at, cost) }
	try("first", 0, 4)
	res := map[string]chan decide.Outcome{}
	for _, id := range ids {
		res[id] = make(chan decide.Outcome, 1)
		cost := map[bool]int64{true: 4, false: 1}[id == "D"]
		go func() { res[id] <- try(id, 500*time.Millisecond, cost) }()
		<-st.decided[id]
	}
	for _, id := range []string{"P2", "P1", "D"} {
		close(st.release[id])
		if o := <-res[id]; (id == "D") == o.Allowed {
			t.Fatalf("%s: allowed %v", id, o.Allowed)
		}
	}
	o := try("x", time.Second, 4)
	if o.Allowed {
		return
	}
	wait := o.Decisions[0].ResetAfter
	if back := try("y", time.Second+wait, 4); !back.Allowed {
		t.Errorf("told at 1 s to wait %v (from memory %v), back then: denied", wait, o.FromMemory)
	}
}
