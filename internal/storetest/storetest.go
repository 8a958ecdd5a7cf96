// Package storetest is the conformance suite of limiter.Store: the tests
// that define the limiter's behaviour, run against every store from this one
// copy. A store's own tests call Run with a Harness that opens it and can
// look inside it.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// Harness is what a store's tests give the suite.
type Harness struct {
	// New opens a fresh, empty store.
	New func(t *testing.T) Instance
	// Broken opens a store whose data cannot be reached. A store whose
	// data cannot be out of its reach (one in the process's own memory)
	// leaves it nil, and FailuresAreUnavailable is not run: there is no
	// fault of its data for it to report.
	Broken func(t *testing.T) limiter.Store
}

// Instance is one store under test, with the means to look inside it.
type Instance struct {
	Store limiter.Store
	// Another opens a second handle on the same data, as another process
	// (Lambda execution environment) would.
	Another func(t *testing.T) limiter.Store
	// Stored is the count kept for key's window that starts at start
	// under p, and its audit records, read from the store's data directly.
	Stored func(t *testing.T, p limiter.Policy, key string, start time.Time) (count int64, audit []Audit)
	// Expire makes the store forget what it may forget at now: counters of
	// windows that ended more than a window before now, and audit records
	// made before auditBefore (none when it is zero). SQLite prunes;
	// DynamoDB's time to live is emulated from the expiry it recorded.
	Expire func(t *testing.T, now, auditBefore time.Time)
}

// Audit is an audit record as the suite charges it.
type Audit struct {
	CalledAt  string // YYYY-MM-DDTHH:MM:SS.sssZ
	Route     string
	RequestID string
	Cost      int64
}

// t0 is 2026-01-01T00:00:00Z, the start of a window of any length that
// divides a day.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var ping = limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("CountsEveryAttemptAndAuditsAllowedOnes", func(t *testing.T) { countsEveryAttempt(t, h) })
	t.Run("WindowBoundaries", func(t *testing.T) { windowBoundaries(t, h) })
	t.Run("UsageNeverWrites", func(t *testing.T) { usageNeverWrites(t, h) })
	t.Run("PoliciesKeepCountersApart", func(t *testing.T) { policiesKeepCountersApart(t, h) })
	t.Run("ConcurrentHandlesCountExactly", func(t *testing.T) { concurrentHandles(t, h) })
	if h.Broken != nil {
		// A store whose data is in its own memory has no failure that may
		// clear by itself: there is nothing to run, rather than a skip.
		t.Run("FailuresAreUnavailable", func(t *testing.T) { failures(t, h) })
	}
	t.Run("ExpiryKeepsLiveWindowsOfEveryPolicy", func(t *testing.T) { expiry(t, h) })
	t.Run("AuditRetention", func(t *testing.T) { auditRetention(t, h) })
	t.Run("EveryPolicyCountsAndAllMustAllow", func(t *testing.T) { everyPolicyCounts(t, h) })
	t.Run("FixedLetsTwiceTheLimitAcrossAnEdgeSlidingDoesNot", func(t *testing.T) { slidingEdge(t, h) })
	t.Run("SlidingUsage", func(t *testing.T) { slidingUsage(t, h) })
	t.Run("ShadowPoliciesNeverReject", func(t *testing.T) { shadowNeverRejects(t, h) })
	t.Run("CostsCountAsManyRequests", func(t *testing.T) { costs(t, h) })
	t.Run("SlidingWeighsCosts", func(t *testing.T) { slidingCosts(t, h) })
	t.Run("GCRABurstThenOneEveryEmission", func(t *testing.T) { gcraBurst(t, h) })
	t.Run("GCRASpacedByTheEmissionNeverFails", func(t *testing.T) { gcraSpaced(t, h) })
	t.Run("GCRACostsConsumeEmissions", func(t *testing.T) { gcraCosts(t, h) })
	t.Run("GCRADeniedAttemptsLeaveTheBucket", func(t *testing.T) { gcraDenied(t, h) })
	t.Run("GCRAUnderConcurrencyNeverOverAdmits", func(t *testing.T) { gcraConcurrent(t, h) })
	t.Run("OverridesChangeTheNextDecisionEverywhere", func(t *testing.T) { overrides(t, h) })
	t.Run("OverridesSurvivePruning", func(t *testing.T) { overridesSurvive(t, h) })
	t.Run("AGCRAOverridesBurstLeavesAWindowPolicy", func(t *testing.T) { burstOfAnotherAlgorithm(t, h) })
	t.Run("AnOverrideBeyondANewWindowStillLetsAFreshKeyIn", func(t *testing.T) { overrideBeyondTheWindow(t, h) })
	t.Run("AnOverrideFasterThanANewWindowAllowsIsSlowedToGCRAsFastest", func(t *testing.T) { overrideFasterThanANewWindowAllows(t, h) })
	t.Run("GCRAOverrideRescalesTheBucket", func(t *testing.T) { gcraRescale(t, h) })
	t.Run("ALoweredOverrideRefusesWhatCouldNeverPass", func(t *testing.T) { loweredOverride(t, h) })
	t.Run("ResetForgetsTheCurrentCounts", func(t *testing.T) { reset(t, h) })
	t.Run("TiersPickTheLimit", func(t *testing.T) { tiersPickTheLimit(t, h) })
	t.Run("ATierChangeMidWindowKeepsTheCount", func(t *testing.T) { tierChangeMidWindow(t, h) })
	t.Run("AnOverrideWinsOverATier", func(t *testing.T) { tierBesideOverride(t, h) })
	t.Run("TiersBoundCosts", func(t *testing.T) { tierCosts(t, h) })
	t.Run("WhatNoRequestCouldHoldIsRefused", func(t *testing.T) { refusals(t, h) })
}

// One is an attempt under a single policy, at now.
func One(p limiter.Policy, key string, now time.Time, route, requestID string) limiter.Attempt {
	return limiter.Attempt{Charges: []limiter.Charge{{Policy: p, Key: key}}, Now: now, Route: route, RequestID: requestID}
}

func attempt(t *testing.T, s limiter.Store, a limiter.Attempt) limiter.Outcome {
	t.Helper()
	return attemptWhole(t, s, a).Public()
}

// attemptWhole is attempt, with what the store reports of its decision
// beyond what callers see (decide.Report): a GCRA bucket's move. What it
// reports must be what it returns.
func attemptWhole(t *testing.T, s limiter.Store, a limiter.Attempt) decide.Outcome {
	t.Helper()
	ctx, whole := decide.Capture(context.Background())
	o, err := s.Allow(ctx, a)
	if err != nil {
		t.Fatalf("allow %+v: %v", a.Charges, err)
	}
	if len(o.Decisions) != len(a.Charges) {
		t.Fatalf("%d decisions for %d charges", len(o.Decisions), len(a.Charges))
	}
	if !reflect.DeepEqual(whole.Public(), o) {
		t.Fatalf("the store reported %+v, and returned %+v", whole.Public(), o)
	}
	return *whole
}

// everyPolicyCounts: a request passes only if every policy allows it, and
// every policy counts every attempt; the audit record is written once, for
// the first charge's key and window.
func everyPolicyCounts(t *testing.T, h Harness) {
	in := h.New(t)
	perMinute := limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}
	perHour := limiter.Policy{Name: "hourly", Limit: 4, Window: time.Hour, Namespace: "hourly"}
	byIP := limiter.Policy{Name: "ip", Limit: 100, Window: time.Minute, Namespace: "ip"}
	var got []string
	for i, at := range []time.Duration{0, 1, 2, 3, 61, 62} {
		now := t0.Add(at * time.Second)
		o := attempt(t, in.Store, limiter.Attempt{
			Charges: []limiter.Charge{{Policy: perMinute, Key: "alice"}, {Policy: perHour, Key: "alice"}, {Policy: byIP, Key: "203.0.113.7"}},
			Now:     now, Route: "GET /ping", RequestID: fmt.Sprint("r", i),
		})
		var denied []string
		for _, d := range o.Denied() {
			denied = append(denied, d.Policy.Name)
		}
		got = append(got, fmt.Sprintf("%v%v", o.Allowed, denied))
	}
	// 1-3: allowed. 4 (same minute): the minute denies. 5 (next minute):
	// the hour's limit of 4 is already spent by four attempts. 6: both.
	want := "[true[] true[] true[] false[ping] false[hourly] false[hourly]]"
	if fmt.Sprint(got) != want {
		t.Errorf("outcomes %v\nwant %v", got, want)
	}
	if count, audit := in.Stored(t, perMinute, "alice", t0); count != 4 || len(audit) != 3 {
		t.Errorf("first minute: count %d, %d audit records; want 4 and 3", count, len(audit))
	}
	if count, _ := in.Stored(t, perHour, "alice", t0); count != 6 {
		t.Errorf("hourly count %d, want 6: every policy counts every attempt", count)
	}
	if count, _ := in.Stored(t, byIP, "203.0.113.7", t0); count != 4 {
		t.Errorf("per-IP count in the first minute %d, want 4", count)
	}
	if _, audit := in.Stored(t, perMinute, "alice", t0.Add(time.Minute)); len(audit) != 0 {
		t.Errorf("%d audit records for denied attempts", len(audit))
	}
}

// slidingEdge sends the limit at the end of one window and again at the
// start of the next: the fixed window lets all of them through, twice its
// limit within a few seconds; the sliding window lets through only what
// the previous window's weight leaves room for.
func slidingEdge(t *testing.T, h Harness) {
	in := h.New(t)
	fixed := limiter.Policy{Name: "fixed", Limit: 10, Window: time.Minute, Namespace: "fixed"}
	sliding := limiter.Policy{Name: "sliding", Limit: 10, Window: time.Minute, Namespace: "sliding", Algorithm: limiter.Sliding}
	allowed := map[string]int{}
	for _, p := range []limiter.Policy{fixed, sliding} {
		for i := range 20 {
			at := t0.Add(55 * time.Second) // the last 5 s of one window...
			if i >= 10 {
				at = t0.Add(62 * time.Second) // ...and the first seconds of the next
			}
			if allow(t, in.Store, p, "edge", at, fmt.Sprint(i)).Allowed {
				allowed[p.Name]++
			}
		}
	}
	// Sliding at 62 s: the previous window's 10 weigh 10 * 58/60 = 9.67,
	// so no room is left for even one more.
	if allowed["fixed"] != 20 || allowed["sliding"] != 10 {
		t.Errorf("allowed across the edge: %v, want fixed 20 (twice its limit) and sliding 10", allowed)
	}
	// Later in the window the previous one's weight fades: at 1m50s it is
	// 10 * 10/60 = 1.67, and with 10 denied attempts counted... still full.
	// The next window after that starts from this one's count.
	if d := allow(t, in.Store, sliding, "edge", t0.Add(3*time.Minute+59*time.Second), "late"); !d.Allowed {
		t.Errorf("two windows later: %+v, want allowed", d)
	}
}

// slidingUsage charges the weighted count that /status reports, and the wait
// a denied client is told.
func slidingUsage(t *testing.T, h Harness) {
	in := h.New(t)
	p := limiter.Policy{Name: "sliding", Limit: 10, Window: time.Minute, Namespace: "sliding", Algorithm: limiter.Sliding}
	for i := range 6 {
		allow(t, in.Store, p, "k", t0.Add(30*time.Second), fmt.Sprint(i)) // 6 in [0, 60)
	}
	for i := range 2 {
		allow(t, in.Store, p, "k", t0.Add(70*time.Second), fmt.Sprint("n", i)) // 2 in [60, 120)
	}
	// At 90 s the previous window weighs half: 6 * 0.5 + 2 = 5.
	u, err := in.Store.Usage(context.Background(), p, "k", t0.Add(90*time.Second))
	if err != nil || u.Count != 5 || u.Remaining != 5 {
		t.Fatalf("usage at 90 s = %+v, %v; want count 5, remaining 5", u, err)
	}
	// Fill it: at 90 s, 5 more are allowed (6 * 0.5 + 7 = 10), and the next
	// is denied. It counts too (8 in this window), so one more fits once
	// 6 * (1 - t/60) + 8 <= 9: at t = 50 s into the window, 20 s later.
	for i := range 5 {
		if d := allow(t, in.Store, p, "k", t0.Add(90*time.Second), fmt.Sprint("f", i)); !d.Allowed {
			t.Fatalf("fill %d: %+v, want allowed", i, d)
		}
	}
	d := allow(t, in.Store, p, "k", t0.Add(90*time.Second), "over")
	if d.Allowed || d.Remaining != 0 || d.ResetAfter != 20*time.Second {
		t.Errorf("over the limit: allowed=%v remaining=%d retry after %v, want denied, 0, 20s", d.Allowed, d.Remaining, d.ResetAfter)
	}
	if d := allow(t, in.Store, p, "k", t0.Add(110*time.Second), "after the wait"); !d.Allowed {
		t.Errorf("after the wait: %+v, want allowed", d)
	}
}

// shadowNeverRejects: a shadow policy counts and says what it would have
// decided, and the request passes unless an enforced policy denies it.
func shadowNeverRejects(t *testing.T, h Harness) {
	in := h.New(t)
	enforced := limiter.Policy{Name: "ping", Limit: 100, Window: time.Minute}
	shadow := limiter.Policy{Name: "trial", Limit: 2, Window: time.Minute, Namespace: "trial", Shadow: true}
	var wouldDeny int
	for i := range 5 {
		o := attempt(t, in.Store, limiter.Attempt{Charges: []limiter.Charge{{Policy: enforced, Key: "k"}, {Policy: shadow, Key: "k"}}, Now: t0, RequestID: fmt.Sprint(i)})
		if !o.Allowed || len(o.Denied()) != 0 {
			t.Fatalf("attempt %d: %+v, want allowed: the shadow policy never rejects", i+1, o)
		}
		if !o.Decisions[1].Allowed {
			wouldDeny++
		}
	}
	if wouldDeny != 3 {
		t.Errorf("the shadow policy would have denied %d attempts, want 3", wouldDeny)
	}
	if count, _ := in.Stored(t, shadow, "k", t0); count != 5 {
		t.Errorf("shadow policy: count %d, want 5: it counts every attempt", count)
	}
	if _, audit := in.Stored(t, enforced, "k", t0); len(audit) != 5 {
		t.Errorf("%d audit records, want 5: every request passed", len(audit))
	}
}

func allow(t *testing.T, s limiter.Store, p limiter.Policy, key string, now time.Time, rid string) limiter.Decision {
	t.Helper()
	o, err := s.Allow(context.Background(), One(p, key, now, "GET /ping", rid))
	if err != nil {
		t.Fatalf("allow %q at %v: %v", key, now, err)
	}
	if len(o.Decisions) != 1 || o.Allowed != o.Decisions[0].Allowed {
		t.Fatalf("allow %q: outcome %+v does not match its one decision", key, o)
	}
	return o.Decisions[0]
}

func countsEveryAttempt(t *testing.T, h Harness) {
	in := h.New(t)
	now := t0.Add(45 * time.Second)
	for i, want := range []struct {
		allowed          bool
		count, remaining int64
	}{{true, 1, 2}, {true, 2, 1}, {true, 3, 0}, {false, 4, 0}, {false, 5, 0}} {
		d := allow(t, in.Store, ping, "alice", now, fmt.Sprintf("req-%d", i+1))
		if d.Allowed != want.allowed || d.Count != want.count || d.Remaining != want.remaining {
			t.Errorf("attempt %d: allowed=%v count=%d remaining=%d, want %+v", i+1, d.Allowed, d.Count, d.Remaining, want)
		}
		if d.ResetAfter != 15*time.Second || !d.Reset.Equal(t0.Add(time.Minute)) || !d.WindowStart.Equal(t0) {
			t.Errorf("attempt %d: window %v, reset %v after %v; want %v, %v after 15s", i+1, d.WindowStart, d.Reset, d.ResetAfter, t0, t0.Add(time.Minute))
		}
	}
	count, audit := in.Stored(t, ping, "alice", t0)
	if count != 5 {
		t.Errorf("stored count %d, want 5: every attempt counts", count)
	}
	want := []Audit{
		{"2026-01-01T00:00:45.000Z", "GET /ping", "req-1", 1},
		{"2026-01-01T00:00:45.000Z", "GET /ping", "req-2", 1},
		{"2026-01-01T00:00:45.000Z", "GET /ping", "req-3", 1},
	}
	if fmt.Sprint(audit) != fmt.Sprint(want) {
		t.Errorf("audit records %v, want one per allowed attempt: %v", audit, want)
	}
}

func windowBoundaries(t *testing.T, h Harness) {
	in := h.New(t)
	for i := range 3 {
		allow(t, in.Store, ping, "bob", t0, fmt.Sprint(i)) // the first instant of the window
	}
	if d := allow(t, in.Store, ping, "bob", t0.Add(time.Minute-time.Nanosecond), "last"); d.Allowed || d.Count != 4 || d.ResetAfter != time.Second {
		t.Errorf("last instant: allowed=%v count=%d resetAfter=%v, want denied, 4, 1s", d.Allowed, d.Count, d.ResetAfter)
	}
	next := t0.Add(time.Minute)
	if d := allow(t, in.Store, ping, "bob", next, "next"); !d.Allowed || d.Count != 1 || !d.WindowStart.Equal(next) || d.ResetAfter != time.Minute {
		t.Errorf("next window: allowed=%v count=%d start=%v resetAfter=%v, want allowed, 1, %v, 1m", d.Allowed, d.Count, d.WindowStart, d.ResetAfter, next)
	}
	if count, audit := in.Stored(t, ping, "bob", t0); count != 4 || len(audit) != 3 {
		t.Errorf("first window: count %d with %d audit records, want 4 and 3", count, len(audit))
	}
}

func usageNeverWrites(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	now := t0.Add(20 * time.Second)
	if u, err := in.Store.Usage(ctx, ping, "carol", now); err != nil || u.Count != 0 || u.Remaining != 3 || u.ResetAfter != 40*time.Second {
		t.Fatalf("usage of an unseen key = %+v, %v; want count 0, remaining 3, reset after 40s", u, err)
	}
	if count, audit := in.Stored(t, ping, "carol", t0); count != 0 || len(audit) != 0 {
		t.Errorf("reading an unseen key stored count %d and %d audit records", count, len(audit))
	}
	allow(t, in.Store, ping, "carol", now, "a")
	allow(t, in.Store, ping, "carol", now, "b")
	for range 3 {
		if u, err := in.Store.Usage(ctx, ping, "carol", now); err != nil || u.Count != 2 || u.Remaining != 1 {
			t.Fatalf("usage = %+v, %v; want count 2, remaining 1", u, err)
		}
	}
	if count, audit := in.Stored(t, ping, "carol", t0); count != 2 || len(audit) != 2 {
		t.Errorf("after reads: count %d, %d audit records; want 2 and 2", count, len(audit))
	}
}

func policiesKeepCountersApart(t *testing.T, h Harness) {
	in := h.New(t)
	strict := limiter.Policy{Name: "strict", Limit: 1, Window: time.Minute, Namespace: "strict"}
	global := limiter.Policy{Name: "global", Limit: 100, Window: time.Minute, Namespace: "global"}
	allow(t, in.Store, ping, "dave", t0, "1")
	if d := allow(t, in.Store, strict, "dave", t0, "2"); !d.Allowed || d.Count != 1 {
		t.Errorf("strict first attempt: %+v, want allowed with count 1", d)
	}
	if d := allow(t, in.Store, strict, "dave", t0, "3"); d.Allowed {
		t.Errorf("strict second attempt allowed")
	}
	if d := allow(t, in.Store, global, "dave", t0, "4"); d.Count != 1 {
		t.Errorf("global count %d, want 1", d.Count)
	}
	// A ping key that looks like a namespaced one is its own counter.
	if d := allow(t, in.Store, ping, "strict\u241fdave", t0, "5"); d.Count != 1 {
		t.Errorf("look-alike key count %d, want 1", d.Count)
	}
	if count, _ := in.Stored(t, ping, "dave", t0); count != 1 {
		t.Errorf("ping counter for dave holds %d, want 1", count)
	}
}

func concurrentHandles(t *testing.T, h Harness) {
	in := h.New(t)
	stores := []limiter.Store{in.Store, in.Another(t)}
	p := limiter.Policy{Name: "ping", Limit: 50, Window: time.Hour}
	const perStore, workers = 100, 4
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for si, s := range stores {
		for w := range workers {
			wg.Go(func() {
				for i := range perStore / workers {
					d, err := s.Allow(context.Background(), One(p, "hot", t0, "GET /ping", fmt.Sprintf("s%dw%di%d", si, w, i)))
					if err != nil {
						t.Errorf("allow: %v", err)
						return
					}
					if d.Allowed {
						mu.Lock()
						allowed++
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	count, audit := in.Stored(t, p, "hot", t0)
	if allowed != 50 || count != 2*perStore || len(audit) != 50 {
		t.Errorf("allowed %d, stored %d, audit records %d; want exactly 50, %d, 50", allowed, count, len(audit), 2*perStore)
	}
}

func failures(t *testing.T, h Harness) {
	s := h.Broken(t)
	if _, err := s.Allow(context.Background(), One(ping, "k", t0, "", "")); !errors.Is(err, limiter.ErrUnavailable) {
		t.Errorf("Allow on a broken store = %v, want ErrUnavailable", err)
	}
	if _, err := s.Usage(context.Background(), ping, "k", t0); !errors.Is(err, limiter.ErrUnavailable) {
		t.Errorf("Usage on a broken store = %v, want ErrUnavailable", err)
	}
}

func expiry(t *testing.T, h Harness) {
	in := h.New(t)
	burst := limiter.Policy{Name: "burst", Limit: 10, Window: time.Second, Namespace: "burst"}
	quota := limiter.Policy{Name: "quota", Limit: 10, Window: limiter.MaxWindow, Namespace: "quota"}
	allow(t, in.Store, ping, "old", t0, "1")                        // [t0, t0+60s)
	allow(t, in.Store, ping, "previous", t0.Add(time.Minute), "2")  // the window before now's
	allow(t, in.Store, ping, "current", t0.Add(2*time.Minute), "3") // now's window
	allow(t, in.Store, burst, "burst", t0.Add(2*time.Minute), "4")  // 1 s window, long gone by now
	allow(t, in.Store, quota, "quota", t0.Add(-24*time.Hour), "5")  // 30-day window, live
	now := t0.Add(2*time.Minute + 30*time.Second)
	in.Expire(t, now, time.Time{})
	for _, c := range []struct {
		p     limiter.Policy
		key   string
		start time.Time
		kept  bool
	}{
		{ping, "old", t0, false},
		{ping, "previous", t0.Add(time.Minute), true},
		{ping, "current", t0.Add(2 * time.Minute), true},
		{burst, "burst", t0.Add(2 * time.Minute), false},
		{quota, "quota", decide.WindowStart(t0.Add(-24*time.Hour), limiter.MaxWindow), true},
	} {
		count, _ := in.Stored(t, c.p, c.key, c.start)
		if kept := count > 0; kept != c.kept {
			t.Errorf("%s %s: kept=%v (count %d), want kept=%v", c.p.Name, c.key, kept, count, c.kept)
		}
	}
	// Audit records stay when no retention is set.
	if _, audit := in.Stored(t, ping, "old", t0); len(audit) != 1 {
		t.Errorf("audit records of the expired window: %d, want 1 (kept without a retention)", len(audit))
	}
}

func auditRetention(t *testing.T, h Harness) {
	in := h.New(t)
	day := limiter.Policy{Name: "ping", Limit: 100, Window: 24 * time.Hour}
	for _, at := range []time.Duration{time.Hour, 2 * time.Hour, 5 * time.Hour} {
		allow(t, in.Store, day, "k", t0.Add(at), at.String())
	}
	in.Expire(t, t0.Add(6*time.Hour), t0.Add(3*time.Hour)) // keep 3 hours
	_, audit := in.Stored(t, day, "k", t0)
	var kept []string
	for _, a := range audit {
		kept = append(kept, a.RequestID)
	}
	sort.Strings(kept)
	if fmt.Sprint(kept) != "[5h0m0s]" {
		t.Errorf("audit records kept: %v, want only the one younger than the retention, 5h0m0s", kept)
	}
	if count, _ := in.Stored(t, day, "k", t0); count != 3 {
		t.Errorf("count %d, want 3: the live window stays", count)
	}
}
