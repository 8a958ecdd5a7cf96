package decide_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

func TestWindowStart(t *testing.T) {
	// 1751328045 is 2025-07-01T00:00:45Z (the design note's example, whose
	// date it misprints as 2026-01-01).
	tests := []struct {
		name   string
		t      time.Time
		window time.Duration
		want   string
	}{
		{"note's example", time.Unix(1751328045, 0), time.Minute, "2025-07-01T00:00:00Z"},
		{"first instant", time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC), time.Minute, "2026-01-01T00:01:00Z"},
		{"last instant", time.Date(2026, 1, 1, 0, 1, 59, 999999999, time.UTC), time.Minute, "2026-01-01T00:01:00Z"},
		{"next window", time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC), time.Minute, "2026-01-01T00:02:00Z"},
		{"local zone is ignored", time.Date(2026, 1, 1, 3, 0, 30, 0, time.FixedZone("X", 3*3600+1800)), time.Hour, "2025-12-31T23:00:00Z"},
		{"window not dividing a day", time.Unix(100, 0), 7 * time.Second, "1970-01-01T00:01:38Z"},
		{"one-second window", time.Unix(1767225600, 999999999), time.Second, "2026-01-01T00:00:00Z"},
		{"30-day window", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 30 * 24 * time.Hour, "2025-12-08T00:00:00Z"},
		{"before 1970 floors", time.Unix(-1, 0), time.Minute, "1969-12-31T23:59:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide.FormatWindow(decide.WindowStart(tt.t, tt.window)); got != tt.want {
				t.Errorf("WindowStart(%v, %v) = %s, want %s", tt.t, tt.window, got, tt.want)
			}
		})
	}
}

func TestDecideAndRetryAfter(t *testing.T) {
	p := limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		at         time.Duration
		count      int64
		allowed    bool
		remaining  int64
		resetAfter time.Duration
	}{
		{"first instant waits the whole window", 0, 1, true, 2, 60 * time.Second},
		{"fraction of a second rounds up", 18*time.Second + time.Millisecond, 2, true, 1, 42 * time.Second},
		{"at the limit", 30 * time.Second, 3, true, 0, 30 * time.Second},
		{"over the limit", 30 * time.Second, 4, false, 0, 30 * time.Second},
		{"last instant waits one second", time.Minute - time.Nanosecond, 9, false, 0, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := decideOne(p, start.Add(tt.at), decide.State{Cur: tt.count})
			if d.Allowed != tt.allowed || d.Remaining != tt.remaining || d.ResetAfter != tt.resetAfter {
				t.Errorf("Decide at +%v with count %d = allowed %v remaining %d retry after %v; want %v %d %v",
					tt.at, tt.count, d.Allowed, d.Remaining, d.ResetAfter, tt.allowed, tt.remaining, tt.resetAfter)
			}
			if !d.Reset.Equal(start.Add(time.Minute)) {
				t.Errorf("reset = %v, want %v", d.Reset, start.Add(time.Minute))
			}
		})
	}
}

func TestPolicyValidateAndStoreKey(t *testing.T) {
	if err := (limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}).Validate(); err != nil {
		t.Errorf("valid policy: %v", err)
	}
	for _, p := range []limiter.Policy{
		{Limit: 3, Window: time.Minute},
		{Name: "p", Limit: 0, Window: time.Minute},
		{Name: "p", Limit: 1, Window: 1500 * time.Millisecond},
		{Name: "p", Limit: 1, Window: limiter.MaxWindow + time.Second},
	} {
		if p.Validate() == nil {
			t.Errorf("%+v validated; want an error", p)
		}
	}
	if got := decide.StoreKey(limiter.Policy{}, "k"); got != "k" {
		t.Errorf("StoreKey without namespace = %q, want the key exactly", got)
	}
	if got := decide.StoreKey(limiter.Policy{Namespace: "strict"}, "k"); got != "strict\x1fk" {
		t.Errorf("StoreKey with namespace = %q", got)
	}
	// NamespaceOf reads back what StoreKey wrote (the memory store's
	// sweep keeps each counter as long as its namespace's longest window).
	for _, ns := range []string{"", "strict", "a b"} {
		if got := decide.NamespaceOf(decide.StoreKey(limiter.Policy{Namespace: ns}, "k:1")); got != ns {
			t.Errorf("NamespaceOf(StoreKey(%q, ...)) = %q", ns, got)
		}
	}
}

// TestOutcomeRetryAfterWaitsForEveryPolicy: a client told to come back
// when the policy that denied it resets must not meet another that has
// nothing left.
func TestOutcomeRetryAfterWaitsForEveryPolicy(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start.Add(18 * time.Second)
	minute := limiter.Policy{Name: "minute", Limit: 3, Window: time.Minute}
	burst := limiter.Policy{Name: "burst", Limit: 2, Window: 10 * time.Second, Namespace: "burst"}
	shadow := limiter.Policy{Name: "hour", Limit: 1, Window: time.Hour, Namespace: "hour", Shadow: true}
	a := limiter.Attempt{Charges: []limiter.Charge{{Policy: minute, Key: "k"}, {Policy: burst, Key: "k"}, {Policy: shadow, Key: "k"}}, Now: now}
	tests := []struct {
		name   string
		cur    []int64
		denied []string
		want   time.Duration
	}{
		{"burst denies, minute has room", []int64{2, 3, 5}, []string{"burst"}, 2 * time.Second},
		{"burst denies, minute is spent", []int64{3, 3, 5}, []string{"burst"}, 42 * time.Second},
		{"both deny", []int64{4, 3, 5}, []string{"minute", "burst"}, 42 * time.Second},
		{"the shadow never adds a wait", []int64{1, 3, 9}, []string{"burst"}, 2 * time.Second},
	}
	for _, tt := range tests {
		o := decide.Decide(a, counts(tt.cur...))
		var denied []string
		for _, d := range o.Public().Denied() {
			denied = append(denied, d.Policy.Name)
		}
		if o.Allowed || !slices.Equal(denied, tt.denied) || o.Public().RetryAfter() != tt.want {
			t.Errorf("%s: allowed %v, denied by %v, retry after %v; want denied by %v, %v", tt.name, o.Allowed, denied, o.Public().RetryAfter(), tt.denied, tt.want)
		}
	}
}

// decide is the decision of one attempt at now under p alone, from st.
func decideOne(p limiter.Policy, now time.Time, st decide.State) decide.Decision {
	return decide.Decide(limiter.Attempt{Charges: []limiter.Charge{{Policy: p, Key: "k"}}, Now: now}, []decide.State{st}).Decisions[0]
}

// counts are states holding the current windows' counts cur.
func counts(cur ...int64) []decide.State {
	st := make([]decide.State, len(cur))
	for i, c := range cur {
		st[i].Cur = c
	}
	return st
}
