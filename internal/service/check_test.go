package service_test

import (
	"encoding/json"

	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
)

// checkRules are a backend's policies for POST /check, 100 a minute and
// 1,000 a day per key; a shadow trial that guards another route, which a
// check may name; and /ping's.
func checkRules() []limiter.Rule {
	return []limiter.Rule{
		{Policy: limiter.Policy{Name: "api", Limit: 100, Window: time.Minute, Namespace: "api"}, Routes: []string{"POST /check"}},
		{Policy: limiter.Policy{Name: "daily", Limit: 1000, Window: 24 * time.Hour, Namespace: "daily"}, Routes: []string{"POST /check"}},
		{Policy: limiter.Policy{Name: "trial", Limit: 2, Window: time.Minute, Namespace: "trial", Shadow: true}, Routes: []string{"/elsewhere"}},
		{Policy: pingPolicy, Routes: []string{"/ping"}},
	}
}

// post sends body to POST /check.
func (f *fixture) post(t *testing.T, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("POST", "/check", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	given := map[string]bool{} // a name given twice is two header lines
	for i := 0; i+1 < len(header); i += 2 {
		if given[header[i]] {
			r.Header.Add(header[i], header[i+1])
			continue
		}
		given[header[i]] = true
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	f.api.ServeHTTP(w, r)
	return w
}

// checkAnswer is POST /check's body, as a client reads it.
type checkAnswer struct {
	Allowed    bool   `json:"allowed"`
	Degraded   bool   `json:"degraded"`
	Key        string `json:"key"`
	Cost       int64  `json:"cost"`
	RetryAfter int64  `json:"retry_after"`
	Policies   []struct {
		Name         string `json:"name"`
		Algorithm    string `json:"algorithm"`
		Limit        int64  `json:"limit"`
		Burst        int64  `json:"burst"`
		Remaining    *int64 `json:"remaining"`
		ResetSeconds *int64 `json:"reset_seconds"`
		Denied       bool   `json:"denied"`
		Shadow       bool   `json:"shadow"`
		Tier         string `json:"tier"`
	} `json:"policies"`
}

func readCheck(t *testing.T, w *httptest.ResponseRecorder) checkAnswer {
	t.Helper()
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q: %s; want 200 application/json", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	var a checkAnswer
	dec := json.NewDecoder(w.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		t.Fatalf("answer: %v", err)
	}
	return a
}

// TestCheckAnswersAsSpecified walks the /check example of the README and
// docs/http.md: a cost of 3 under api and daily, then the cost that fills
// api exactly, then one unit more, denied as data (200), counted too.
func TestCheckAnswersAsSpecified(t *testing.T) {
	f := newFixture(t, service.Options{Rules: checkRules()})
	a := readCheck(t, f.post(t, `{"key": "user-42", "cost": 3, "policies": ["api", "daily"]}`))
	if !a.Allowed || a.Key != "user-42" || a.Cost != 3 || a.RetryAfter != 0 || len(a.Policies) != 2 {
		t.Fatalf("answer %+v", a)
	}
	p := a.Policies[0]
	if p.Name != "api" || p.Algorithm != "fixed" || p.Limit != 100 || *p.Remaining != 97 || *p.ResetSeconds != 42 || p.Denied {
		t.Errorf("api: %+v, want limit 100, remaining 97, reset 42, not denied", p)
	}
	if p := a.Policies[1]; p.Name != "daily" || *p.Remaining != 997 || *p.ResetSeconds != 86400-18 {
		t.Errorf("daily: %+v", p)
	}
	if a := readCheck(t, f.post(t, `{"key": "user-42", "cost": 97, "policies": ["api"]}`)); !a.Allowed || *a.Policies[0].Remaining != 0 {
		t.Errorf("the cost that fills the limit: %+v, want allowed with 0 left", a)
	}
	w := f.post(t, `{"key": "user-42", "policies": ["api", "daily"]}`)
	a = readCheck(t, w)
	if a.Allowed || a.RetryAfter != 42 || !a.Policies[0].Denied || a.Policies[1].Denied || *a.Policies[1].Remaining != 996 {
		t.Errorf("one unit more: %+v, want denied by api, retry after 42, daily not denied (996 left: 3 + this 1)", a)
	}
	wantHeader(t, w, "RateLimit-Policy", `"api";q=100;w=60, "daily";q=1000;w=86400`)
	wantHeader(t, w, "RateLimit", `"api";r=0;t=42, "daily";r=996;t=86382`)
	db := sqlitetest.Inspect(t, f.store.Path())
	if n := sqlitetest.QueryInt(t, db, `SELECT count FROM rate_limit_windows WHERE key = 'api'||char(31)||'user-42'`); n != 101 {
		t.Errorf("api count %d, want 101: every attempt counts its cost", n)
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT sum(cost) FROM api_calls WHERE key = 'user-42' AND route = 'POST /check'`); n != 100 {
		t.Errorf("audited cost %d, want 100: one audit row per allowed check, with its cost", n)
	}
}

// TestCheckDefaultsToThePoliciesOfPostCheck: without "policies", every
// policy whose routes match POST /check applies; none, a 400.
func TestCheckDefaultsToThePoliciesOfPostCheck(t *testing.T) {
	f := newFixture(t, service.Options{Rules: checkRules()})
	a := readCheck(t, f.post(t, `{"key": "k"}`))
	if len(a.Policies) != 2 || a.Policies[0].Name != "api" || a.Policies[1].Name != "daily" || a.Cost != 1 {
		t.Errorf("default policies %+v, want api and daily at cost 1", a.Policies)
	}
	// The shadow, named: reported, never denying.
	for range 3 {
		a = readCheck(t, f.post(t, `{"key": "k", "policies": ["trial"]}`))
	}
	if !a.Allowed || a.Policies[0].Denied || !a.Policies[0].Shadow || *a.Policies[0].Remaining != 0 {
		t.Errorf("a shadow over its limit: %+v, want allowed, reported, not denied", a)
	}
	g := newFixture(t, service.Options{})
	wantProblem(t, g.post(t, `{"key": "k"}`), 400, service.TypeInvalidRequest, "/check")
}

// TestCheckRefusesWhatIsWrong: every malformed request is a 400 problem
// naming what is wrong, and counts nothing.
func TestCheckRefusesWhatIsWrong(t *testing.T) {
	f := newFixture(t, service.Options{Rules: checkRules()})
	for body, why := range map[string]string{
		`{"cost": 1}`:                 `"key" is required`,
		`{"key": ""}`:                 "empty",
		`{"key": "a\u0000b"}`:         "control character",
		`{"key": 42}`:                 `"key"`,
		`{"key": "k", "cost": 0}`:     `"cost" must be a whole number of at least 1`,
		`{"key": "k", "cost": -1}`:    `"cost"`,
		`{"key": "k", "cost": 1.5}`:   `"cost"`,
		`{"key": "k", "cost": "3"}`:   `"cost"`,
		`{"key": "k", "cost": 1001}`:  `1001 is more than policy "api" can ever let through at once, 100`,
		`{"key": "k", "cost": 101}`:   `101 is more than policy "api" can ever let through at once, 100`,
		`{"key": "k", "cost": 1e400}`: `"cost" is 1e400, more than any cost can be`,
		`{"key": "k", "cost": ` + strings.Repeat("9", 5000) + `}`: `is ` + strings.Repeat("9", 40) + "…, more than any cost can be.",
		`{"Key": "k"}`:                             `unknown member "Key"; members are key, cost, policies`,
		`{"key": "k", "key": "j"}`:                 `member "key" is given twice`,
		`{"key": "k", "cost": 1, "cost": 2}`:       `member "cost" is given twice`,
		`{"key": "k", "policies": ["nope"]}`:       `no such policy: "nope"`,
		`{"key": "k", "policies": ["api", "api"]}`: "named twice",
		`{"key": "k", "policies": []}`:             `"policies" is empty`,
		`{"key": "k", "policies": "api"}`:          `"policies"`,
		`{"key": "k", "extra": 1}`:                 `unknown member "extra"`,
		`{"key": "k"`:                              "invalid JSON",
		`{"key": "k"} {"key": "j"}`:                "more than one JSON value",
		`[]`:                                       "must be a JSON object",
		`null`:                                     "the body must be a JSON object, not null",
		" null\n":                                  "the body must be a JSON object, not null",
		``:                                         "empty",
	} {
		w := f.post(t, body)
		p := wantProblem(t, w, 400, map[bool]string{true: service.TypeInvalidKey, false: service.TypeInvalidRequest}[strings.Contains(why, "control") || why == "empty" && body != ""], "/check")
		if d, _ := p["detail"].(string); !strings.Contains(d, why) {
			t.Errorf("%.60s: detail %q does not say %q", body, d, why)
		}
	}
	if n := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, f.store.Path()), `SELECT count(*) FROM rate_limit_windows`); n != 0 {
		t.Errorf("%d counters written by refused checks", n)
	}
	w := f.post(t, `{"key": "`+strings.Repeat("x", service.MaxCheckBody)+`"}`)
	if p := wantProblem(t, w, 413, service.TypeInvalidRequest, "/check"); !strings.Contains(p["detail"].(string), "over 65536 bytes") || p["title"] != "Content Too Large" {
		t.Errorf("a body over the bound: %v, want RFC 9110's title, Content Too Large", p)
	}
	w = f.do(t, "GET", "/check")
	wantProblem(t, w, 405, service.TypeBlank, "/check")
	wantHeader(t, w, "Allow", "POST")
	w = f.post(t, `{"key": "k"}`, "Content-Type", "text/plain")
	wantProblem(t, w, 415, service.TypeInvalidRequest, "/check")
}

// TestCheckWhenTheStoreFails: closed, a 503 problem with Retry-After;
// open, allowed and degraded, with nothing known.
func TestCheckWhenTheStoreFails(t *testing.T) {
	closed := newFixture(t, service.Options{Rules: checkRules(), Store: brokenStore(t)})
	w := closed.post(t, `{"key": "k", "cost": 2}`)
	wantProblem(t, w, 503, service.TypeStoreUnavailable, "/check")
	wantHeader(t, w, "Retry-After", "5")
	open := newFixture(t, service.Options{Rules: checkRules(), Store: brokenStore(t), FailMode: limiter.FailOpen})
	w = open.post(t, `{"key": "k", "cost": 2}`)
	raw := w.Body.String()
	a := readCheck(t, w)
	if !a.Allowed || !a.Degraded || a.Cost != 2 || len(a.Policies) != 2 || a.Policies[0].Remaining != nil || a.Policies[0].ResetSeconds != nil {
		t.Errorf("fail open: %+v, want allowed, degraded, null counts", a)
	}
	if !strings.Contains(raw, `"remaining":null`) || w.Header().Get("RateLimit") != "" {
		t.Errorf("fail open: %s, headers %v: want null counts and no rate limit headers", raw, w.Header())
	}
}

// TestCheckWithGCRA: a GCRA policy through /check: the burst, then a wait
// of one emission, and what is left, told in r.
func TestCheckWithGCRA(t *testing.T) {
	tokens := limiter.Rule{Policy: limiter.Policy{Name: "tokens", Limit: 60, Window: time.Minute, Namespace: "tokens", Algorithm: limiter.GCRA, Burst: 5}, Routes: []string{"POST /check"}}
	f := newFixture(t, service.Options{Rules: []limiter.Rule{tokens}})
	a := readCheck(t, f.post(t, `{"key": "k", "cost": 5}`))
	if !a.Allowed || *a.Policies[0].Remaining != 0 || a.Policies[0].Algorithm != "gcra" || a.Policies[0].Burst != 5 {
		t.Fatalf("the whole burst: %+v, want allowed, nothing left of a burst of 5", a)
	}
	w := f.post(t, `{"key": "k"}`)
	if a := readCheck(t, w); a.Allowed || a.RetryAfter != 1 {
		t.Errorf("past the burst: %+v, want denied, retry after 1 (T = 1 s)", a)
	}
	wantHeader(t, w, "RateLimit-Policy", `"tokens";q=60;w=60`)
	wantHeader(t, w, "RateLimit", `"tokens";r=0;t=1`)
	// A cost beyond the burst could never pass: refused, as x/time/rate
	// refuses a reservation beyond its burst, not denied with a wait
	// after which it would be denied again.
	w = f.post(t, `{"key": "k", "cost": 6}`)
	if p := wantProblem(t, w, 400, service.TypeInvalidRequest, "/check"); !strings.Contains(p["detail"].(string), `6 is more than policy "tokens" can ever let through at once, 5`) {
		t.Errorf("a cost beyond the burst: %v", p)
	}
	if w := f.post(t, `{"key": "k", "cost": 61}`); w.Code != 400 {
		t.Errorf("a cost beyond the limit: %d, want 400", w.Code)
	}
}

// TestCheckRefusesAnEncodedBody: a body sent with a Content-Encoding the
// service does not undo (gzip, any but identity) is a 415, as RFC 9110 has
// it, naming the coding; it used to be read as it came, so a gzipped body
// was "invalid JSON at byte 1" and a plain one labelled gzip was taken.
func TestCheckRefusesAnEncodedBody(t *testing.T) {
	f := newFixture(t, service.Options{Rules: checkRules()})
	for enc, want := range map[string]int{"gzip": 415, "br": 415, "gzip, identity": 415, "identity": 200, "IDENTITY": 200} {
		w := f.post(t, `{"key": "k", "policies": ["daily"]}`, "Content-Encoding", enc)
		if w.Code != want {
			t.Errorf("Content-Encoding %s: %d, want %d", enc, w.Code, want)
			continue
		}
		if want == 415 {
			p := wantProblem(t, w, 415, service.TypeInvalidRequest, "/check")
			if d, _ := p["detail"].(string); !strings.Contains(d, "Content-Encoding") {
				t.Errorf("Content-Encoding %s: detail %q does not name Content-Encoding", enc, d)
			}
			wantHeader(t, w, "Accept-Encoding", "identity")
			wantHeader(t, w, "Accept-Post", "application/json")
		}
	}
	// Two lines of a list field are one list (RFC 9110 §5.3): a coding on
	// a second line is refused as on the first (only the first line was
	// read, so identity then gzip was taken as identity), and so is a
	// second Content-Type line that differs from the first.
	for _, lines := range [][]string{
		{"Content-Encoding", "identity", "Content-Encoding", "gzip"},
		{"Content-Encoding", "gzip", "Content-Encoding", "identity"},
		{"Content-Encoding", "identity", "Content-Encoding", "identity, gzip"},
		{"Content-Type", "application/json", "Content-Type", "text/plain"},
	} {
		w := f.post(t, `{"key": "k", "policies": ["daily"]}`, lines...)
		wantProblem(t, w, 415, service.TypeInvalidRequest, "/check")
	}
	for _, lines := range [][]string{
		{"Content-Encoding", "identity", "Content-Encoding", "IDENTITY"},
		{"Content-Type", "application/json", "Content-Type", "application/json"},
	} {
		if w := f.post(t, `{"key": "k", "policies": ["daily"]}`, lines...); w.Code != 200 {
			t.Errorf("%q: %d, want 200 (%s)", lines, w.Code, w.Body)
		}
	}
}

// TestCheckReadsTheBodyAsWritten: a number is read as the literal it is,
// not as the float nearest it (1.0000000000000001 was taken for 1); a null
// member is refused, naming it, whichever member it is ("policies": null
// was taken for no policies named, "cost": null refused), and so is a null
// among the policies ("policies": [null] was taken for a policy named "",
// "no such policy"); a charset but
// UTF-8 is a 415 (a UTF-16 body was parsed as UTF-8).
func TestCheckReadsTheBodyAsWritten(t *testing.T) {
	f := newFixture(t, service.Options{Rules: checkRules()})
	for _, cost := range []string{"100", "1e2", "100.0", "1.00e2", "1000e-1", "100.000000000000000000000", "0.0001e6"} {
		w := f.post(t, `{"key": "k", "cost": `+cost+`, "policies": ["daily"]}`)
		if a := readCheck(t, w); a.Cost != 100 {
			t.Errorf("cost %s: %+v, want a cost of 100", cost, a)
		}
	}
	for body, why := range map[string]string{
		`{"key": "k", "cost": 1.0000000000000001}`:   `"cost" must be a whole number of at least 1, not 1.0000000000000001`,
		`{"key": "k", "cost": 99.99999999999999999}`: `"cost" must be a whole number of at least 1, not 99.99999999999999999`,
		`{"key": "k", "cost": 1e-400}`:               `"cost" must be a whole number of at least 1, not 1e-400`,
		// A whole number beyond int64 is too large, not "no whole number".
		`{"key": "k", "cost": 1e9223372036854775807}`: `"cost" is 1e9223372036854775807, more than any cost can be`,
		`{"key": "k", "cost": 99999999999999999999}`:  `"cost" is 99999999999999999999, more than any cost can be`,
		`{"key": "k", "cost": -1e30}`:                 `"cost" must be a whole number of at least 1, not -1e30`,
		`{"key": null}`:                               `"key" must not be null`,
		`{"key": "k", "cost": null}`:                  `"cost" must not be null`,
		`{"key": "k", "policies": null}`:              `"policies" must not be null`,
		`{"key": "k", "policies": [null]}`:            `"policies" must not hold null`,
		`{"key": "k", "policies": ["daily", null]}`:   `"policies" must not hold null`,
	} {
		p := wantProblem(t, f.post(t, body), 400, service.TypeInvalidRequest, "/check")
		if d, _ := p["detail"].(string); !strings.Contains(d, why) {
			t.Errorf("%s: detail %q does not say %q", body, d, why)
		}
	}
	if n := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, f.store.Path()), `SELECT coalesce(sum(count), 0) FROM rate_limit_windows`); n != 700 {
		t.Errorf("%d units counted, want the 7 checks of 100: a refused check counts nothing", n)
	}
	for ct, want := range map[string]int{
		"application/json; charset=utf-16":   415,
		"application/json; charset=latin1":   415,
		"application/json; charset=utf8":     415,
		"application/json; charset=UTF-8":    200,
		`application/json;charset="utf-8"`:   200,
		"application/json; profile=whatever": 200,
	} {
		w := f.post(t, `{"key": "k"}`, "Content-Type", ct)
		if w.Code != want {
			t.Errorf("Content-Type %s: %d, want %d", ct, w.Code, want)
			continue
		}
		if want == 415 {
			wantProblem(t, w, 415, service.TypeInvalidRequest, "/check")
			wantHeader(t, w, "Accept-Post", "application/json")
		}
	}
}
