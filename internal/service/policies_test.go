package service_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/metrics"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// fourPolicies are configured as a user would, through POLICIES: the seed's
// policy, a sliding burst limit, a daily quota, and a strict limit being
// rolled out in shadow.
const fourPolicies = `[
	{"name": "ping",   "limit": 3, "window": "60s"},
	{"name": "burst",  "limit": 2, "window": "10s", "algorithm": "sliding"},
	{"name": "daily",  "limit": 5, "window": "1d"},
	{"name": "strict", "limit": 1, "window": "60s", "shadow": true}
]`

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func rulesFrom(t *testing.T, policies string) []limiter.Rule {
	t.Helper()
	env := map[string]string{"POLICIES": policies, "DB_PATH": "unused"}
	cfg, err := readEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Rules
}

func wantHeader(t *testing.T, w *httptest.ResponseRecorder, name, want string) {
	t.Helper()
	if got := w.Header().Get(name); got != want {
		t.Errorf("%s:\n got %s\nwant %s", name, got, want)
	}
}

// deniedBy returns the names and retry_after of the policies a 429 names
// as having denied it.
func deniedBy(t *testing.T, body map[string]any) map[string]float64 {
	return namedIn(t, body, true)
}

// namedIn returns the names and retry_after of the policies in a 429's
// "policies" whose "denied" is denied.
func namedIn(t *testing.T, body map[string]any, denied bool) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	ps, _ := body["policies"].([]any)
	for _, p := range ps {
		m := p.(map[string]any)
		if m["denied"] == denied {
			out[m["name"].(string)] = m["retry_after"].(float64)
		}
	}
	return out
}

func TestSeveralPoliciesOnOneRoute(t *testing.T) {
	c := &clock{t0.Add(18 * time.Second)}
	var emf bytes.Buffer
	f := newFixture(t, service.Options{Rules: rulesFrom(t, fourPolicies), Now: c.now, Metrics: metrics.New(&emf, "RateLimit/test")})
	ping := func() *httptest.ResponseRecorder { return f.do(t, "GET", "/ping", "X-Client-Key", "alice") }

	// 1st at :18. burst's window is [10s, 20s); the one before it is empty.
	w := ping()
	if w.Code != http.StatusOK {
		t.Fatalf("1st: %d %s", w.Code, w.Body)
	}
	wantHeader(t, w, "RateLimit-Policy", `"ping";q=3;w=60, "burst";q=2;w=10, "daily";q=5;w=86400, "strict";q=1;w=60`)
	wantHeader(t, w, "RateLimit", `"ping";r=2;t=42, "burst";r=1;t=2, "daily";r=4;t=86382, "strict";r=0;t=42`)
	// The X- headers hold the tightest enforced policy: burst, 1 left.
	wantHeader(t, w, "X-RateLimit-Limit", "2")
	wantHeader(t, w, "X-RateLimit-Remaining", "1")
	if ps, _ := decode(t, w)["policies"].([]any); len(ps) != 4 {
		t.Errorf("200 body lists %d policies, want 4: %s", len(ps), w.Body)
	}

	// 2nd: strict (shadow) would reject; nobody is rejected.
	if w = ping(); w.Code != http.StatusOK {
		t.Fatalf("2nd: %d %s; a shadow policy must never reject", w.Code, w.Body)
	}
	// burst has none left; one more fits once this window's weight has
	// faded enough next window: at 25 s, 2*(1-0.5) = 1. 25 - 18 = 7.
	wantHeader(t, w, "RateLimit", `"ping";r=1;t=42, "burst";r=0;t=7, "daily";r=3;t=86382, "strict";r=0;t=42`)

	// 3rd: burst denies alone; ping allows it, its last. Retry-After waits
	// for ping too: back after burst's 9 s, the client would meet ping's
	// limit.
	w = ping()
	body := wantProblem(t, w, http.StatusTooManyRequests, service.TypeRateLimited, "/ping")
	if got := deniedBy(t, body); len(got) != 1 || got["burst"] != 9 {
		t.Errorf("3rd denied by %v, want burst only, retry_after 9 (3*(1-t/10) <= 1 at t = 6.67 s into the next window)", got)
	}
	wantHeader(t, w, "Retry-After", "42")
	if got := namedIn(t, body, false); len(got) != 1 || got["ping"] != 42 {
		t.Errorf("3rd: policies holding the next request back %v, want ping (42), not denied", got)
	}
	if d := body["detail"].(string); d != "Rate limit of 2 requests per 10s exceeded for key 'alice'. The limit of 3 requests per 60s for key 'alice' is used up too." {
		t.Errorf("3rd: detail %q", d)
	}

	// 4th: ping denies too; Retry-After is the longer wait, and the body
	// names both, not the shadow.
	w = ping()
	body = wantProblem(t, w, http.StatusTooManyRequests, service.TypeRateLimited, "/ping")
	if got := deniedBy(t, body); len(got) != 2 || got["ping"] != 42 || got["burst"] != 10 {
		t.Errorf("4th denied by %v, want ping (42) and burst (10)", got)
	}
	wantHeader(t, w, "Retry-After", "42")
	if d := body["detail"].(string); !strings.Contains(d, "3 requests per 60s") || !strings.Contains(d, "2 requests per 10s") {
		t.Errorf("detail %q does not say which limits were exceeded", d)
	}

	// At :25 burst's new window is weighed with the last: 4*0.5 + 1 = 3 > 2.
	c.t = t0.Add(25 * time.Second)
	if w = ping(); w.Code != http.StatusTooManyRequests || deniedBy(t, decode(t, w))["burst"] == 0 {
		t.Fatalf("at :25 sliding burst should still deny: %d %s", w.Code, w.Body)
	}
	w = f.do(t, "GET", "/status?key=alice&policy=burst")
	if got := decode(t, w); got["count"] != 3.0 || got["limit"] != 2.0 {
		t.Errorf("/status?policy=burst = %s, want the weighted count 3", w.Body)
	}

	// A minute on, ping and burst have started over; the daily quota has
	// counted all five attempts and denies the sixth until midnight.
	c.t = t0.Add(61 * time.Second)
	w = ping()
	if got := deniedBy(t, wantProblem(t, w, http.StatusTooManyRequests, service.TypeRateLimited, "/ping")); len(got) != 1 || got["daily"] != 86400-61 {
		t.Errorf("6th denied by %v, want daily only until midnight", got)
	}
	wantHeader(t, w, "Retry-After", "86339")

	// Each policy keeps its own counters: ping's under the key as is.
	rows := map[string]int64{}
	rs, err := sqlitetest.Inspect(t, f.store.Path()).Query(`SELECT key, window_start, count FROM rate_limit_windows`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	for rs.Next() {
		var k, ws string
		var n int64
		if err := rs.Scan(&k, &ws, &n); err != nil {
			t.Fatal(err)
		}
		rows[strings.ReplaceAll(k, "\x1f", "/")+"@"+ws] = n
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{
		"alice@2026-01-01T00:00:00Z": 5, "alice@2026-01-01T00:01:00Z": 1,
		"burst/alice@2026-01-01T00:00:10Z": 4, "burst/alice@2026-01-01T00:00:20Z": 1, "burst/alice@2026-01-01T00:01:00Z": 1,
		"daily/alice@2026-01-01T00:00:00Z":  6,
		"strict/alice@2026-01-01T00:00:00Z": 5, "strict/alice@2026-01-01T00:01:00Z": 1,
	}
	for k, n := range want {
		if rows[k] != n {
			t.Errorf("row %s = %d, want %d", k, rows[k], n)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("rows %v, want %v", rows, want)
	}

	// One EMF line per policy and request, each valid: 6 requests x 4.
	decisions := map[string]int{}
	sc := bufio.NewScanner(&emf)
	for sc.Scan() {
		if err := metrics.Validate(sc.Bytes()); err != nil {
			t.Fatalf("EMF line invalid: %v\n%s", err, sc.Bytes())
		}
		var m map[string]any
		json.Unmarshal(sc.Bytes(), &m)
		decisions[m["Policy"].(string)+" "+m["Decision"].(string)]++
	}
	for k, n := range map[string]int{
		"ping allowed": 4, "ping rejected": 2,
		"burst allowed": 3, "burst rejected": 3,
		"daily allowed": 5, "daily rejected": 1,
		"strict allowed": 2, "strict shadow_rejected": 4,
	} {
		if decisions[k] != n {
			t.Errorf("EMF %s = %d, want %d (all: %v)", k, decisions[k], n, decisions)
		}
	}
}

// SHADOW=on turns every policy into a shadow: clients past the limit are
// counted, told where they stand and logged, but never turned away.
func TestGlobalShadowNeverRejects(t *testing.T) {
	env := map[string]string{"DB_PATH": "unused", "RATE_LIMIT": "2", "SHADOW": "on"}
	cfg, err := readEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, service.Options{Rules: cfg.Rules})
	for i := 1; i <= 5; i++ {
		w := f.do(t, "GET", "/ping", "X-Client-Key", "alice")
		if w.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s; shadow mode must never reject", i, w.Code, w.Body)
		}
		if got := decode(t, w)["count"]; got != float64(i) {
			t.Errorf("request %d: count %v; shadow mode still counts", i, got)
		}
		if i > 2 {
			wantHeader(t, w, "RateLimit", `"ping";r=0;t=42`)
		}
	}
	var shadowed int
	sc := bufio.NewScanner(f.logs)
	for sc.Scan() {
		var entry map[string]any
		if err := json.Unmarshal(sc.Bytes(), &entry); err != nil {
			t.Fatal(err)
		}
		if s, _ := entry["shadow_rejected"].([]any); len(s) == 1 && s[0] == "ping" {
			shadowed++
		}
	}
	if shadowed != 3 {
		t.Errorf("%d log lines name a shadow rejection, want 3:\n%s", shadowed, f.logs)
	}
}

// A store failure is measured whatever the fail mode answers: it is what
// the template's alarm watches.
func TestStoreErrorsAreMeasured(t *testing.T) {
	for _, mode := range []limiter.FailMode{limiter.FailOpen, limiter.FailClosed} {
		var emf bytes.Buffer
		f := newFixture(t, service.Options{Store: brokenStore(t), FailMode: mode, Metrics: metrics.New(&emf, "")})
		f.do(t, "GET", "/ping", "X-Client-Key", "alice")
		line := bytes.TrimSpace(emf.Bytes())
		if err := metrics.Validate(line); err != nil {
			t.Fatalf("%s: %v: %q", mode, err, line)
		}
		var m map[string]any
		json.Unmarshal(line, &m)
		if m["StoreErrors"] != 1.0 || m["Route"] != "GET /ping" || m["Fault"] != "unavailable" || bytes.Count(line, []byte("\n")) != 0 {
			t.Errorf("%s: want one StoreErrors line for GET /ping, fault unavailable, got %s", mode, emf.Bytes())
		}
	}
}

// faultyStore fails every decision with err.
type faultyStore struct {
	limiter.Store
	err error
}

func (s faultyStore) Allow(context.Context, limiter.Attempt) (limiter.Outcome, error) {
	return limiter.Outcome{}, s.err
}

// TestPersistentFaultsAreErrorsWithTheirClass: a store fault that will not
// clear by itself (a corrupt file) is logged at ERROR with its class and
// measured under its Fault, where a busy lock is a WARN: an alarm can tell
// "corrupt" from "busy". Both get the fail mode's answer.
func TestPersistentFaultsAreErrorsWithTheirClass(t *testing.T) {
	for _, tc := range []struct {
		fault fault.Class
		level string
	}{{fault.Corrupt, "ERROR"}, {fault.Schema, "ERROR"}, {fault.JournalMode, "ERROR"}, {fault.Busy, "WARN"}, {fault.Unavailable, "WARN"}} {
		var emf bytes.Buffer
		err := fault.Failed(tc.fault, "sqlite: decide /x.db: injected")
		f := newFixture(t, service.Options{Store: faultyStore{Store: sqlitetest.Open(t, sqlite.Config{}), err: err}, Metrics: metrics.New(&emf, "")})
		w := f.do(t, "GET", "/ping", "X-Client-Key", "alice")
		wantProblem(t, w, 503, service.TypeStoreUnavailable, "/ping")
		var m, log map[string]any
		json.Unmarshal(bytes.TrimSpace(emf.Bytes()), &m)
		json.Unmarshal(bytes.TrimSpace(f.logs.Bytes()), &log)
		if m["Fault"] != string(tc.fault) {
			t.Errorf("%s: metric Fault = %v", tc.fault, m["Fault"])
		}
		if log["level"] != tc.level || log["fault"] != string(tc.fault) {
			t.Errorf("%s: log level %v, fault %v; want %s, %s", tc.fault, log["level"], log["fault"], tc.level, tc.fault)
		}
	}
}

// A shadow policy that cannot find its key leaves the answer to the
// enforced ones: rolling out a claim-keyed limit must not start 401s.
func TestShadowWithoutItsKeyChangesNothing(t *testing.T) {
	caller := func(*http.Request) service.Caller { return service.Caller{SourceIP: "203.0.113.7"} }
	rules := rulesFrom(t, `[{"name":"ping","limit":3,"window":"60s","key":"source-ip"},
		{"name":"tenant","limit":1,"window":"60s","key":"claim:sub","shadow":true},
		{"name":"client","limit":1,"window":"60s","key":"header","shadow":true}]`)
	f := newFixture(t, service.Options{Rules: rules, Caller: caller})
	w := f.do(t, "GET", "/ping", "X-Client-Key", strings.Repeat("k", 300))
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s: shadows that cannot find their keys must not answer 400 or 401", w.Code, w.Body)
	}
	wantHeader(t, w, "RateLimit-Policy", `"ping";q=3;w=60`)
	if !strings.Contains(f.logs.String(), `"shadow_skipped":["tenant","client"]`) {
		t.Errorf("log does not name the skipped shadows: %s", f.logs)
	}

	// The same shadows with nothing enforced: the request passes uncounted.
	f = newFixture(t, service.Options{Rules: rules[1:], Caller: caller})
	w = f.do(t, "GET", "/ping", "X-Client-Key", "bad\x01key")
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"counted":false}` || w.Header().Get("RateLimit") != "" {
		t.Errorf("only skipped shadows: %d %v %s, want 200 {\"counted\":false} without headers", w.Code, w.Header(), w.Body)
	}

	// An enforced policy without its key still answers as before.
	rules[0].Policy.Shadow = false
	rules[1].Policy.Shadow = false
	f = newFixture(t, service.Options{Rules: rules, Caller: caller})
	wantProblem(t, f.do(t, "GET", "/ping"), http.StatusUnauthorized, service.TypeUnauthenticated, "/ping")
}

// TestACostAbove1IsToldInRequests is the tester's case: "a" lets 10
// units a minute through and /ping costs 4 of them; "b" 1 a 2 s. The
// second ping is denied by b, and a, with 2 units left, has no request
// left either: the X- headers describe a (the longer wait: they used to
// describe b, sending the client back 54 s before Retry-After), and the
// detail says a has less left than the request costs (it said "used up",
// beside r=2).
func TestACostAbove1IsToldInRequests(t *testing.T) {
	c := &clock{t0.Add(5 * time.Second)}
	f := newFixture(t, service.Options{Rules: rulesFrom(t, `[{"name":"a","limit":10,"window":"60s","cost":4},{"name":"b","limit":1,"window":"2s"}]`), Now: c.now})
	if w := f.do(t, "GET", "/ping", "X-Client-Key", "dave"); w.Code != http.StatusOK {
		t.Fatalf("1st: %d %s", w.Code, w.Body)
	}
	w := f.do(t, "GET", "/ping", "X-Client-Key", "dave")
	body := wantProblem(t, w, http.StatusTooManyRequests, service.TypeRateLimited, "/ping")
	wantHeader(t, w, "Retry-After", "55")
	wantHeader(t, w, "RateLimit", `"a";r=2;t=55, "b";r=0;t=1`)
	wantHeader(t, w, "X-RateLimit-Limit", "10")
	wantHeader(t, w, "X-RateLimit-Reset", fmt.Sprint(t0.Add(time.Minute).Unix()))
	if d := body["detail"].(string); d != "Rate limit of 1 request per 2s exceeded for key 'dave'. The limit of 10 requests per 60s for key 'dave' has 2 left, less than the request's cost, 4." {
		t.Errorf("detail %q", d)
	}
}
