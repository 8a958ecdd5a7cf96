package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/internal/rejectcache"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// adminRules are /ping's policy, a check quota and a GCRA bucket.
func adminRules() []limiter.Rule {
	return []limiter.Rule{
		{Policy: pingPolicy, Routes: []string{"/ping"}},
		{Policy: limiter.Policy{Name: "api", Limit: 10, Window: time.Minute, Namespace: "api"}, Routes: []string{"POST /check"}},
		{Policy: limiter.Policy{Name: "tokens", Limit: 60, Window: time.Minute, Namespace: "tokens", Algorithm: limiter.GCRA, Burst: 2}, Routes: []string{"/elsewhere"}},
	}
}

func newAdmin(t *testing.T, opts service.Options) *fixture {
	opts.Rules = adminRules()
	opts.Routes = []string{service.RoutePing, service.RouteStatus, service.RouteCheck, service.RouteAdmin}
	opts.Caller = func(r *http.Request) service.Caller {
		return service.Caller{SourceIP: "192.0.2.1", Principal: r.Header.Get("X-Test-Principal")}
	}
	return newFixture(t, opts)
}

func (f *fixture) send(t *testing.T, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("X-Test-Principal", "arn:aws:iam::123456789012:user/ops")
	w := httptest.NewRecorder()
	f.api.ServeHTTP(w, r)
	return w
}

// lastLog is the request log line last written.
func (f *fixture) lastLog(t *testing.T) map[string]any {
	t.Helper()
	lines := bytes.Split(bytes.TrimSpace(f.logs.Bytes()), []byte("\n"))
	var m map[string]any
	if err := json.Unmarshal(lines[len(lines)-1], &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAdminOverridesAsSpecified: PUT sets an override and answers it; the
// next decision, /status, /check and the 429 use the effective limit; GET
// reads it; DELETE removes it (204, also when there was none) and the key
// is back to the policy's limit. Each change logs who, when, what, before
// and after.
func TestAdminOverridesAsSpecified(t *testing.T) {
	f := newAdmin(t, service.Options{})
	w := f.send(t, "PUT", "/admin/overrides/ping/alice", `{"limit": 5}`)
	if w.Code != 200 || decode(t, w)["limit"] != 5.0 || decode(t, w)["policy"] != "ping" || decode(t, w)["key"] != "alice" || decode(t, w)["burst"] != nil {
		t.Fatalf("PUT: %d %s", w.Code, w.Body)
	}
	log := f.lastLog(t)
	admin, _ := log["admin"].(map[string]any)
	if admin["action"] != "set override" || admin["by"] != "arn:aws:iam::123456789012:user/ops" || admin["before"] != nil ||
		admin["after"].(map[string]any)["limit"] != 5.0 || admin["at"] != "2026-01-01T00:00:18Z" {
		t.Errorf("log line: %v", log)
	}
	for i := range 5 {
		if w := f.do(t, "GET", "/ping", "X-Client-Key", "alice"); w.Code != 200 {
			t.Fatalf("ping %d under the override: %d", i+1, w.Code)
		}
	}
	w = f.do(t, "GET", "/ping", "X-Client-Key", "alice")
	wantHeader(t, w, "RateLimit-Policy", `"ping";q=5;w=60`)
	if w.Code != 429 || !strings.Contains(w.Body.String(), `"limit":5`) {
		t.Errorf("6th ping: %d %s, want a 429 telling the limit of 5", w.Code, w.Body)
	}
	if b := decode(t, f.do(t, "GET", "/status?key=alice&policy=ping")); b["limit"] != 5.0 {
		t.Errorf("status: %v, want the effective limit 5", b)
	}
	if b := decode(t, f.do(t, "GET", "/admin/overrides/ping/alice")); b["limit"] != 5.0 {
		t.Errorf("GET: %v", b)
	}
	f.send(t, "PUT", "/admin/overrides/ping/alice", `{"limit": 50}`)
	if admin := f.lastLog(t)["admin"].(map[string]any); admin["before"].(map[string]any)["limit"] != 5.0 {
		t.Errorf("replacing: before %v, want the limit 5", admin["before"])
	}
	if w := f.send(t, "DELETE", "/admin/overrides/ping/alice", ""); w.Code != 204 || w.Body.Len() != 0 {
		t.Errorf("DELETE: %d %q, want 204 and no body", w.Code, w.Body)
	}
	if admin := f.lastLog(t)["admin"].(map[string]any); admin["action"] != "delete override" || admin["after"] != nil {
		t.Errorf("delete's log: %v", admin)
	}
	wantProblem(t, f.do(t, "GET", "/admin/overrides/ping/alice"), 404, service.TypeBlank, "/admin/overrides/ping/alice")
	if w := f.send(t, "DELETE", "/admin/overrides/ping/alice", ""); w.Code != 204 {
		t.Errorf("DELETE of none: %d, want 204", w.Code)
	}
	if w := f.do(t, "GET", "/ping", "X-Client-Key", "alice"); w.Code != 429 || w.Header().Get("RateLimit-Policy") != `"ping";q=3;w=60` {
		t.Errorf("after the delete: %d %v, want the policy's 3 again", w.Code, w.Header())
	}
	// /check's answers report it too; GCRA overrides take a burst.
	f.send(t, "PUT", "/admin/overrides/api/user-1", `{"limit": 100}`)
	if a := readCheck(t, f.post(t, `{"key": "user-1", "cost": 50}`)); !a.Allowed || a.Policies[0].Limit != 100 {
		t.Errorf("check under the override: %+v, want allowed at 50 of 100", a)
	}
	w = f.send(t, "PUT", "/admin/overrides/tokens/vip", `{"limit": 600, "burst": 20}`)
	if b := decode(t, w); w.Code != 200 || b["burst"] != 20.0 || b["limit"] != 600.0 {
		t.Errorf("gcra PUT: %d %v, want limit 600 and burst 20", w.Code, b)
	}
	if b := decode(t, f.do(t, "GET", "/admin/overrides/tokens/vip")); b["burst"] != 20.0 {
		t.Errorf("gcra GET: %v", b)
	}
}

// TestAdminResetForgetsAKeysCounts: the key's next attempt passes as a
// fresh key's; the log line tells the count it had.
func TestAdminResetForgetsAKeysCounts(t *testing.T) {
	f := newAdmin(t, service.Options{})
	for range 4 {
		f.do(t, "GET", "/ping", "X-Client-Key", "bob")
	}
	if w := f.send(t, "DELETE", "/admin/counters/ping/bob", ""); w.Code != 204 {
		t.Fatalf("reset: %d %s", w.Code, w.Body)
	}
	if admin := f.lastLog(t)["admin"].(map[string]any); admin["action"] != "reset counters" || admin["before"].(map[string]any)["count"] != 4.0 {
		t.Errorf("log: %v", admin)
	}
	if b := decode(t, f.do(t, "GET", "/ping", "X-Client-Key", "bob")); b["count"] != 1.0 {
		t.Errorf("after the reset: %v, want a fresh count of 1", b)
	}
}

// TestAdminRefusesWhatIsWrong: an unknown policy is a 404 problem, a key
// that is not a valid client key a 400, a bad body a 400, another method a
// 405 with Allow, another path a 404.
func TestAdminRefusesWhatIsWrong(t *testing.T) {
	f := newAdmin(t, service.Options{})
	wantProblem(t, f.send(t, "PUT", "/admin/overrides/nope/alice", `{"limit": 5}`), 404, service.TypeBlank, "/admin/overrides/nope/alice")
	wantProblem(t, f.send(t, "PUT", "/admin/overrides/ping/a%00b", `{"limit": 5}`), 400, service.TypeInvalidKey, "/admin/overrides/ping/a%00b")
	for body, why := range map[string]string{
		``: "empty", `{}`: `"limit" is required`, `{"limit": 0}`: "limit 0 is below 1", `{"limit": 1.5}`: `"limit"`,
		`{"limit": 5, "burst": 2}`: "burst applies to gcra policies only", `{"limit": 5, "extra": 1}`: `unknown member "extra"; members are limit, burst`,
		`[5]`: "JSON object", `{"limit": 5`: "invalid JSON",
	} {
		p := wantProblem(t, f.send(t, "PUT", "/admin/overrides/ping/alice", body), 400, service.TypeInvalidRequest, "/admin/overrides/ping/alice")
		if d, _ := p["detail"].(string); !strings.Contains(d, why) {
			t.Errorf("%q: detail %q does not say %q", body, d, why)
		}
	}
	w := f.send(t, "POST", "/admin/overrides/ping/alice", `{"limit": 5}`)
	wantProblem(t, w, 405, service.TypeBlank, "/admin/overrides/ping/alice")
	if allow := w.Header().Get("Allow"); !strings.Contains(allow, "PUT") || !strings.Contains(allow, "DELETE") || !strings.Contains(allow, "GET") {
		t.Errorf("Allow %q, want GET, PUT and DELETE", allow)
	}
	wantProblem(t, f.send(t, "GET", "/admin/other", ""), 404, service.TypeBlank, "/admin/other")
	// A key with a slash, percent-encoded, is one segment: one key.
	if w := f.send(t, "PUT", "/admin/overrides/ping/team%2Fa", `{"limit": 9}`); w.Code != 200 || decode(t, w)["key"] != "team/a" {
		t.Errorf("encoded key: %d %s, want the key team/a", w.Code, w.Body)
	}
	// Without RouteAdmin the routes are unknown paths.
	g := newFixture(t, service.Options{})
	wantProblem(t, g.do(t, "GET", "/admin/overrides/ping/alice"), 404, service.TypeBlank, "/admin/overrides/ping/alice")
}

// TestAdminRefusesWhatWouldNotApply: a path ServeMux would redirect (an
// empty, "." or ".." segment) is not a route, and changes nothing, rather
// than a redirect an admin client might follow to another key; a key with
// spaces around it, which no request's trimmed key has; an override that
// could not let one request of the policy's constant cost through; a body
// that is not JSON, or whose members differ from the contract's only in
// case, or come twice.
func TestAdminRefusesWhatWouldNotApply(t *testing.T) {
	rules := append(adminRules(), limiter.Rule{Policy: limiter.Policy{Name: "orders", Limit: 100, Window: time.Hour, Namespace: "orders"}, Routes: []string{"POST /orders"}, Cost: 5})
	f := newFixture(t, service.Options{Rules: rules, Routes: []string{service.RouteAdmin}})
	for _, target := range []string{"/admin//overrides/ping/alice", "/admin/overrides/./ping/alice", "/admin/overrides/x/../ping/alice", "/admin/overrides/ping/alice/"} {
		w := f.send(t, "PUT", target, `{"limit": 5}`)
		if w.Code != 404 || w.Header().Get("Location") != "" {
			t.Errorf("PUT %s: %d %v, want 404 and no redirect", target, w.Code, w.Header())
		}
	}
	if o, _ := f.store.Override(context.Background(), pingPolicy, "alice"); o != nil {
		t.Errorf("an unclean path set an override: %+v", o)
	}
	wantProblem(t, f.send(t, "PUT", "/admin/overrides/ping/%20alice", `{"limit": 5}`), 400, service.TypeInvalidKey, "/admin/overrides/ping/%20alice")
	for body, why := range map[string]string{
		`{"limit": 4}`:              `under "orders" each request costs 5, more than the override would ever let through at once, 4`,
		`{"Limit": 50}`:             `unknown member "Limit"; members are limit, burst`,
		`{"limit": 50, "limit": 9}`: `member "limit" is given twice`,
	} {
		p := wantProblem(t, f.send(t, "PUT", "/admin/overrides/orders/bob", body), 400, service.TypeInvalidRequest, "/admin/overrides/orders/bob")
		if d, _ := p["detail"].(string); !strings.Contains(d, why) {
			t.Errorf("%s: detail %q does not say %q", body, d, why)
		}
	}
	r := httptest.NewRequest("PUT", "/admin/overrides/orders/bob", strings.NewReader("limit=50"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	f.api.ServeHTTP(w, r)
	wantProblem(t, w, 415, service.TypeInvalidRequest, "/admin/overrides/orders/bob")
	if w := f.send(t, "PUT", "/admin/overrides/orders/bob", `{"limit": 5}`); w.Code != 200 {
		t.Errorf("an override of one request's cost: %d %s", w.Code, w.Body)
	}
	// A whole number in any form JSON writes one, as /check's cost.
	if w := f.send(t, "PUT", "/admin/overrides/orders/bob", `{"limit": 1e1}`); w.Code != 200 || decode(t, w)["limit"] != float64(10) {
		t.Errorf("a limit of 1e1: %d %s, want 10", w.Code, w.Body)
	}
}

// TestAnOverrideReachesTheRejectCacheAtOnce: a key denied from memory
// under its old limit is decided by the store under its new one as soon
// as this process sets the override (or resets the key), not up to
// rejectcache.MaxRemembered later.
func TestAnOverrideReachesTheRejectCacheAtOnce(t *testing.T) {
	store := sqlitetest.Open(t, sqlite.Config{})
	f := newFixture(t, service.Options{Store: rejectcache.New(store, 0), Routes: []string{service.RoutePing, service.RouteAdmin}})
	for range 4 {
		f.do(t, "GET", "/ping", "X-Client-Key", "alice")
	}
	if w := f.do(t, "GET", "/ping", "X-Client-Key", "alice"); w.Code != 429 || !strings.Contains(f.lastLogLine(t), `"from_memory":true`) {
		t.Fatalf("alice over her limit: %d, want denied from memory", w.Code)
	}
	if w := f.send(t, "PUT", "/admin/overrides/ping/alice", `{"limit": 100}`); w.Code != 200 {
		t.Fatalf("override: %d %s", w.Code, w.Body)
	}
	if w := f.do(t, "GET", "/ping", "X-Client-Key", "alice"); w.Code != 200 {
		t.Errorf("alice after her override: %d %s, want allowed under 100", w.Code, w.Body)
	}
	f.send(t, "DELETE", "/admin/overrides/ping/alice", "")
	f.do(t, "GET", "/ping", "X-Client-Key", "alice") // denied by the store, remembered
	if w := f.send(t, "DELETE", "/admin/counters/ping/alice", ""); w.Code != 204 {
		t.Fatalf("reset: %d %s", w.Code, w.Body)
	}
	if w := f.do(t, "GET", "/ping", "X-Client-Key", "alice"); w.Code != 200 {
		t.Errorf("alice after her reset: %d %s, want allowed", w.Code, w.Body)
	}
}

func (f *fixture) lastLogLine(t *testing.T) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(f.logs.String()), "\n")
	return lines[len(lines)-1]
}

// TestAdminBodiesAreReadAsWritten: an override's body is read as /check's
// is: a number as the literal it is (5.0000000000000001 was taken for 5),
// a null member refused, naming it, and a charset but UTF-8 a 415.
func TestAdminBodiesAreReadAsWritten(t *testing.T) {
	f := newAdmin(t, service.Options{})
	for body, want := range map[string]float64{`{"limit": 1.00e1}`: 10, `{"limit": 70.0}`: 70, `{"limit": 700e-1, "burst": 0.3e1}`: 70} {
		target := "/admin/overrides/ping/alice"
		if strings.Contains(body, "burst") {
			target = "/admin/overrides/tokens/alice"
		}
		if w := f.send(t, "PUT", target, body); w.Code != 200 || decode(t, w)["limit"] != want {
			t.Errorf("PUT %s: %d %s, want a limit of %v", body, w.Code, w.Body, want)
		}
	}
	for target, bodies := range map[string]map[string]string{
		"/admin/overrides/ping/bob": {
			`{"limit": 5.0000000000000001}`: `"limit" must be a whole number, not 5.0000000000000001`,
			`{"limit": 1e30}`:               `"limit" is 1e30, more than any limit can be`,
			`{"limit": null}`:               `"limit" must not be null`,
		},
		"/admin/overrides/tokens/bob": {
			`{"limit": 60, "burst": 2.00000000000000001}`: `"burst" must be a whole number of at least 1, not 2.00000000000000001`,
			`{"limit": 60, "burst": 1e30}`:                `"burst" is 1e30, more than any burst can be`,
			`{"limit": 60, "burst": null}`:                `"burst" must not be null`,
		},
	} {
		for body, why := range bodies {
			p := wantProblem(t, f.send(t, "PUT", target, body), 400, service.TypeInvalidRequest, target)
			if d, _ := p["detail"].(string); !strings.Contains(d, why) {
				t.Errorf("PUT %s %s: detail %q does not say %q", target, body, d, why)
			}
		}
	}
	r := httptest.NewRequest("PUT", "/admin/overrides/ping/bob", strings.NewReader(`{"limit": 5}`))
	r.Header.Set("Content-Type", "application/json; charset=utf-16")
	w := httptest.NewRecorder()
	f.api.ServeHTTP(w, r)
	wantProblem(t, w, 415, service.TypeInvalidRequest, "/admin/overrides/ping/bob")
	for _, p := range []limiter.Policy{pingPolicy, adminRules()[2].Policy} {
		if o, _ := f.store.Override(context.Background(), p, "bob"); o != nil {
			t.Errorf("a refused body set bob's override under %s: %+v", p.Name, *o)
		}
	}
}

// unknownOutcomeStore fails every override write as a DynamoDB store does
// when the answers to its write were lost until its budget ran out: the
// write may have been made.
type unknownOutcomeStore struct{ limiter.Store }

var errOutcomeUnknown = fault.Failed(fault.Unavailable, "dynamodb: set override t (9 tries): connection reset")

func (unknownOutcomeStore) SetOverride(context.Context, limiter.Policy, string, limiter.Override) (*limiter.Override, error) {
	return nil, errOutcomeUnknown
}

func (unknownOutcomeStore) DeleteOverride(context.Context, limiter.Policy, string) (*limiter.Override, error) {
	return nil, errOutcomeUnknown
}

func (unknownOutcomeStore) Reset(context.Context, limiter.Policy, string, time.Time) error {
	return errOutcomeUnknown
}

// TestAFailedAdminWriteLogsItsBeforeAsUnknown: a set, delete or reset
// whose store answered an error is a 503, and its log line still names the
// action, with before and after "unknown": the write may have been made,
// and nothing says what it replaced. Each used to log no action at all (a
// reset until a tester, helper-34, found it).
func TestAFailedAdminWriteLogsItsBeforeAsUnknown(t *testing.T) {
	f := newAdmin(t, service.Options{Store: unknownOutcomeStore{sqlitetest.Open(t, sqlite.Config{})}})
	for _, tc := range []struct{ method, path, body, action string }{
		{"PUT", "/admin/overrides/ping/alice", `{"limit": 5}`, "set override"},
		{"DELETE", "/admin/overrides/ping/alice", "", "delete override"},
		{"DELETE", "/admin/counters/ping/alice", "", "reset counters"},
	} {
		w := f.send(t, tc.method, tc.path, tc.body)
		wantProblem(t, w, 503, service.TypeStoreUnavailable, tc.path)
		log := f.lastLog(t)
		admin, _ := log["admin"].(map[string]any)
		if log["decision"] != "error" || admin["action"] != tc.action || admin["before"] != "unknown" || admin["after"] != "unknown" {
			t.Errorf("%s: log decision %v, admin %v; want error, %q with before and after unknown", tc.method, log["decision"], admin, tc.action)
		}
	}
}

// TestAdminOverridesUnderTiers: an override that sets no burst keeps the
// burst of a key's tier, or, for a tier without one, has its own limit as
// the burst. So it is checked under every tier: an override of 5 leaves
// the policy's own bucket of 10, but tier big's at 5, short of the rule's
// cost of 6: refused, naming the tier; with a burst of 6 it is taken. One
// that would make an invalid policy under a tier (a bucket of 1300
// emissions of 30 days) is refused too.
func TestAdminOverridesUnderTiers(t *testing.T) {
	rules := append(adminRules(),
		limiter.Rule{Routes: []string{"POST /batch"}, Cost: 6, Policy: limiter.Policy{Name: "batch", Limit: 60, Window: time.Minute, Namespace: "batch",
			Algorithm: limiter.GCRA, Burst: 10, Tiers: map[string]limiter.Tier{"big": {Limit: 600}}}},
		limiter.Rule{Routes: []string{"POST /slow"}, Policy: limiter.Policy{Name: "slow", Limit: 1, Window: 30 * 24 * time.Hour, Namespace: "slow",
			Algorithm: limiter.GCRA, Tiers: map[string]limiter.Tier{"pro": {Limit: 100, Burst: 1300}}}})
	f := newFixture(t, service.Options{Rules: rules, Routes: []string{service.RouteAdmin}})
	for target, want := range map[string]string{
		"/admin/overrides/batch/bob": `under "batch" each request costs 6, more than the override would ever let through at once under tier big, 5`,
		"/admin/overrides/slow/bob":  `policy "slow" under tier "pro": a burst of 1300 every 720h0m0s would take more than a century to drain`,
	} {
		body := `{"limit": 5}`
		if strings.Contains(target, "slow") {
			body = `{"limit": 1}`
		}
		p := wantProblem(t, f.send(t, "PUT", target, body), 400, service.TypeInvalidRequest, target)
		if d, _ := p["detail"].(string); !strings.Contains(d, want) {
			t.Errorf("PUT %s %s: %q, want it to say %q", target, body, d, want)
		}
	}
	if w := f.send(t, "PUT", "/admin/overrides/batch/bob", `{"limit": 5, "burst": 6}`); w.Code != 200 {
		t.Errorf("an override with a burst of the rule's cost: %d %s", w.Code, w.Body)
	}
	if w := f.send(t, "PUT", "/admin/overrides/slow/bob", `{"limit": 1, "burst": 1}`); w.Code != 200 {
		t.Errorf("an override with a burst of its own: %d %s", w.Code, w.Body)
	}
}
