package service_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// plans is /ping limited per JWT subject, 2 a minute, with a pro plan of
// 4, picked by the authorizer's "plan" claim, as POLICIES configures it;
// and a limit without tiers beside it.
const plans = `[
	{"name": "ping", "limit": 2, "window": "60s", "key": "claim:sub", "tiers": {"pro": {"limit": 4}}, "tier": {"source": "claim", "claim": "plan"}},
	{"name": "hourly", "limit": 100, "window": "1h", "key": "claim:sub"}
]`

// claimsFixture is an API on plans whose callers' claims are claims.
func claimsFixture(t *testing.T, claims map[string]string, m service.Metrics) *fixture {
	return newFixture(t, service.Options{Rules: rulesFrom(t, plans), Metrics: m,
		Caller: func(*http.Request) service.Caller { return service.Caller{Claims: claims} }})
}

// policyEntry is the "policies" entry of a 429 or /check answer named
// name.
func policyEntry(t *testing.T, body map[string]any, name string) map[string]any {
	t.Helper()
	ps, _ := body["policies"].([]any)
	for _, p := range ps {
		if m := p.(map[string]any); m["name"] == name {
			return m
		}
	}
	t.Fatalf("no policy %q in %v", name, body)
	return nil
}

// TestThePlanClaimPicksTheLimit: a caller whose plan claim is pro gets
// pro's 4, one on another plan (free, which the policy does not list) or
// with no plan claim at all the policy's own 2; the headers carry the
// limit of the tier in force, the bodies and the 429 name the tier, for
// the policy with tiers only; the log line and the metrics carry it, a
// plan no tier has as "default".
func TestThePlanClaimPicksTheLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		claims map[string]string
		limit  int
		tier   string
	}{
		{"pro", map[string]string{"sub": "p", "plan": "pro"}, 4, "pro"},
		{"free", map[string]string{"sub": "f", "plan": "free"}, 2, "default"},
		{"no plan", map[string]string{"sub": "n"}, 2, "default"},
		{"a plan made up", map[string]string{"sub": "x", "plan": "Pro\x00<script>"}, 2, "default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var emf bytes.Buffer
			f := claimsFixture(t, tc.claims, metrics.New(&emf, ""))
			for i := range tc.limit {
				w := f.do(t, "GET", "/ping")
				if w.Code != 200 {
					t.Fatalf("request %d: %d %s", i+1, w.Code, w.Body)
				}
				// X-RateLimit-Limit is the tightest policy's: ping's, under
				// its tier, as long as hourly has more left.
				wantHeader(t, w, "X-RateLimit-Limit", itoa(tc.limit))
				wantHeader(t, w, "RateLimit-Policy", `"ping";q=`+itoa(tc.limit)+`;w=60, "hourly";q=100;w=3600`)
				body := decode(t, w)
				if body["limit"] != float64(tc.limit) || body["tier"] != tc.tier {
					t.Errorf("request %d: limit %v, tier %v; want %d, %s", i+1, body["limit"], body["tier"], tc.limit, tc.tier)
				}
				if ps := body["policies"].([]any); ps[1].(map[string]any)["tier"] != nil {
					t.Errorf("the policy without tiers names a tier: %v", ps[1])
				}
			}
			w := f.do(t, "GET", "/ping")
			body := wantProblem(t, w, 429, service.TypeRateLimited, "/ping")
			wantHeader(t, w, "X-RateLimit-Limit", itoa(tc.limit))
			if p := policyEntry(t, body, "ping"); p["tier"] != tc.tier || p["limit"] != float64(tc.limit) {
				t.Errorf("429 ping entry %v, want tier %s, limit %d", p, tc.tier, tc.limit)
			}
			if d := body["detail"].(string); !strings.Contains(d, "(tier "+tc.tier+")") {
				t.Errorf("429 detail %q does not name the tier", d)
			}
			// The log line and the metrics name only configured tiers.
			var last map[string]any
			sc := bufio.NewScanner(strings.NewReader(f.logs.String()))
			for sc.Scan() {
				json.Unmarshal(sc.Bytes(), &last)
			}
			if last["tier"] != tc.tier {
				t.Errorf("log tier %v, want %s: %v", last["tier"], tc.tier, last)
			}
			if p := last["policies"].([]any); p[0].(map[string]any)["tier"] != tc.tier || p[1].(map[string]any)["tier"] != nil {
				t.Errorf("log policies %v, want ping's tier %s and none for hourly", p, tc.tier)
			}
			tiers := map[string]int{}
			sc = bufio.NewScanner(&emf)
			for sc.Scan() {
				var m map[string]any
				if err := metrics.Validate(sc.Bytes()); err != nil {
					t.Fatal(err)
				}
				json.Unmarshal(sc.Bytes(), &m)
				tiers[m["Policy"].(string)+" "+m["Tier"].(string)+" "+m["Decision"].(string)]++
			}
			want := map[string]int{"ping " + tc.tier + " allowed": tc.limit, "ping " + tc.tier + " rejected": 1, "hourly default allowed": tc.limit + 1}
			if len(tiers) != len(want) {
				t.Errorf("EMF %v, want %v", tiers, want)
			}
			for k, n := range want {
				if tiers[k] != n {
					t.Errorf("EMF %s: %d, want %d (all: %v)", k, tiers[k], n, tiers)
				}
			}
		})
	}
}

// TestATierChangeKeepsTheCount: counts are per key: a caller that used up
// the free 2 and moves to pro (a new token) in the same window has 2 more
// under pro's 4, not 4; back on free it is denied.
func TestATierChangeKeepsTheCount(t *testing.T) {
	claims := map[string]string{"sub": "u"}
	f := claimsFixture(t, claims, nil)
	for range 2 {
		f.do(t, "GET", "/ping")
	}
	wantProblem(t, f.do(t, "GET", "/ping"), 429, service.TypeRateLimited, "/ping")
	claims["plan"] = "pro"
	if body := decode(t, f.do(t, "GET", "/ping")); body["count"] != 4.0 || body["remaining"] != 0.0 || body["tier"] != "pro" {
		t.Errorf("on pro: %v, want count 4 (the 3 on free and this), none left of 4", body)
	}
	wantProblem(t, f.do(t, "GET", "/ping"), 429, service.TypeRateLimited, "/ping")
	delete(claims, "plan")
	body := wantProblem(t, f.do(t, "GET", "/ping"), 429, service.TypeRateLimited, "/ping")
	if p := policyEntry(t, body, "ping"); p["tier"] != "default" || p["limit"] != 2.0 {
		t.Errorf("back on free: %v", p)
	}
}

// TestATierHeader: a header source reads the header's raw value, trimmed;
// a value no tier has is the default tier; the header is the client's to
// set, so it is documented as trusted only behind something that sets
// it.
func TestATierHeader(t *testing.T) {
	f := newFixture(t, service.Options{Rules: rulesFrom(t, `[{"name": "ping", "limit": 1, "window": "60s", "tiers": {"pro": {"limit": 3}}, "tier": {"source": "header", "header": "X-Plan"}}]`)})
	for i, want := range []int{200, 200, 200, 429} {
		if w := f.do(t, "GET", "/ping", "X-Client-Key", "a", "X-Plan", " pro\t"); w.Code != want {
			t.Errorf("pro %d: %d, want %d", i+1, w.Code, want)
		}
	}
	for i, want := range []int{200, 429} {
		if w := f.do(t, "GET", "/ping", "X-Client-Key", "b", "X-Plan", "enterprise"); w.Code != want {
			t.Errorf("a tier not listed %d: %d, want %d", i+1, w.Code, want)
		}
	}
}

// TestCheckNamesItsTier: POST /check takes "tier", a string, trusted as
// the key is; the answer names the tier of each policy that has tiers;
// null and other types are refused, as for every member.
func TestCheckNamesItsTier(t *testing.T) {
	rules := rulesFrom(t, `[
		{"name": "api", "limit": 10, "window": "60s", "routes": ["POST /check"], "tiers": {"pro": {"limit": 100}}},
		{"name": "daily", "limit": 1000, "window": "1d", "routes": ["POST /check"]}]`)
	f := newFixture(t, service.Options{Rules: rules})
	a := readCheck(t, f.post(t, `{"key": "k", "cost": 50, "tier": "pro"}`))
	if !a.Allowed || a.Policies[0].Limit != 100 || *a.Policies[0].Remaining != 50 {
		t.Errorf("cost 50 on pro: %+v, want allowed, 50 of 100 left", a)
	}
	w := f.post(t, `{"key": "k", "cost": 50, "tier": "pro"}`)
	var body map[string]any
	json.Unmarshal(w.Body.Bytes(), &body)
	if p := policyEntry(t, body, "api"); p["tier"] != "pro" {
		t.Errorf("api entry %v, want tier pro", p)
	}
	if p := policyEntry(t, body, "daily"); p["tier"] != nil {
		t.Errorf("daily entry %v names a tier; it has none", p)
	}
	wantHeader(t, w, "RateLimit-Policy", `"api";q=100;w=60, "daily";q=1000;w=86400`)
	if w := f.post(t, `{"key": "k", "cost": 50}`); w.Code != 400 || !strings.Contains(w.Body.String(), "more than policy") {
		t.Errorf("cost 50 on the default tier's 10: %d %s, want 400", w.Code, w.Body)
	}
	w = f.post(t, `{"key": "k2", "tier": "gold"}`)
	json.Unmarshal(w.Body.Bytes(), &body)
	if p := policyEntry(t, body, "api"); p["tier"] != "default" || p["limit"] != 10.0 {
		t.Errorf("a tier not listed: %v, want the default 10", p)
	}
	for in, want := range map[string]string{
		`{"key": "k", "tier": null}`:  `"tier" must not be null`,
		`{"key": "k", "tier": 3}`:     `"tier" must be a string, not number`,
		`{"key": "k", "Tier": "pro"}`: `unknown member "Tier"`,
	} {
		w := f.post(t, in)
		if p := wantProblem(t, w, 400, service.TypeInvalidRequest, "/check"); !strings.Contains(p["detail"].(string), want) {
			t.Errorf("%s: %v, want it to say %s", in, p["detail"], want)
		}
	}
}

// TestStatusReadsUnderATier: /status?tier= reads a key's standing under
// that tier's limit, the count being the key's whatever the tier; with
// ?policy= or without; one value at most; a tier not listed is the
// default.
func TestStatusReadsUnderATier(t *testing.T) {
	f := claimsFixture(t, map[string]string{"sub": "u", "plan": "pro"}, nil)
	for range 3 {
		f.do(t, "GET", "/ping")
	}
	for _, tc := range []struct {
		query            string
		limit, remaining float64
		tier             any
	}{
		{"/status?key=u&tier=pro", 4, 1, "pro"},
		{"/status?key=u&policy=ping&tier=pro", 4, 1, "pro"},
		{"/status?key=u", 2, 0, "default"},
		{"/status?key=u&tier=gold", 2, 0, "default"},
		{"/status?key=u&policy=hourly&tier=pro", 100, 97, nil},
	} {
		body := decode(t, f.do(t, "GET", tc.query))
		if body["count"] != 3.0 || body["limit"] != tc.limit || body["remaining"] != tc.remaining || body["tier"] != tc.tier {
			t.Errorf("%s: %v, want count 3, limit %v, remaining %v, tier %v", tc.query, body, tc.limit, tc.remaining, tc.tier)
		}
	}
	wantProblem(t, f.do(t, "GET", "/status?key=u&tier=pro&tier=free"), 400, service.TypeInvalidQuery, "/status")
}

// TestTierFunctions: a function of the request picks the tier; its
// *Problem is answered, another error is logged and the request gets the
// default tier. A function for no policy, for a policy without tiers, a
// nil one, and one beside a claim source are refused.
func TestTierFunctions(t *testing.T) {
	rules := rulesFrom(t, `[{"name": "ping", "limit": 1, "window": "60s", "tiers": {"pro": {"limit": 2}}}]`)
	f := newFixture(t, service.Options{Rules: rules, Tiers: map[string]service.TierFunc{"ping": func(r *http.Request) (string, error) {
		switch r.Header.Get("X-Client-Key") {
		case "paying":
			return "pro", nil
		case "banned":
			return "", service.BadRequest("no such account")
		case "lookup":
			return "pro", errors.New("accounts database down")
		}
		return "", nil
	}}})
	for i, want := range []int{200, 200, 429} {
		if w := f.do(t, "GET", "/ping", "X-Client-Key", "paying"); w.Code != want {
			t.Errorf("pro %d: %d, want %d", i+1, w.Code, want)
		}
	}
	wantProblem(t, f.do(t, "GET", "/ping", "X-Client-Key", "banned"), 400, service.TypeInvalidRequest, "/ping")
	if body := decode(t, f.do(t, "GET", "/ping", "X-Client-Key", "lookup")); body["tier"] != "default" || body["limit"] != 1.0 {
		t.Errorf("a failed lookup: %v, want the default tier", body)
	}
	if !strings.Contains(f.logs.String(), "tier of ping: accounts database down") {
		t.Errorf("the lookup's error is not logged:\n%s", f.logs)
	}

	claim := rulesFrom(t, `[{"name": "ping", "limit": 1, "window": "60s", "tiers": {"pro": {"limit": 2}}, "tier": {"source": "claim", "claim": "plan"}},
		{"name": "plain", "limit": 1, "window": "60s"}]`)
	f0 := func(*http.Request) (string, error) { return "", nil }
	_, err := service.New(service.Options{Store: f.store, Rules: claim, Tiers: map[string]service.TierFunc{"ping": f0, "plain": f0, "none": f0, "nil": nil}})
	for _, want := range []string{
		`policy "ping" has both a TierClaim or TierHeader and a tier function`,
		`Tiers["plain"]: the policy has no tiers to choose from`,
		`Tiers names no policy: "none"`,
		`Tiers names no policy: "nil"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nwant it to say %q", err, want)
		}
	}
	if _, err := service.New(service.Options{Store: f.store, Rules: rules, Tiers: map[string]service.TierFunc{"ping": nil}}); err == nil || !strings.Contains(err.Error(), `Tiers["ping"] is nil`) {
		t.Errorf("a nil tier function: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
