package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/httpapi"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// guard is a handler behind the middleware, and what it logged.
type guard struct {
	h    http.Handler
	logs *bytes.Buffer
}

// newGuard puts next behind Middleware(opts), with a fresh store and the
// tests' clock unless opts has them, and fails the test if it refuses.
func newGuard(t *testing.T, opts httpapi.Options, next http.Handler) *guard {
	t.Helper()
	if opts.Store == nil {
		opts.Store = sqlitetest.Open(t, sqlite.Config{BusyTimeout: time.Second})
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return now }
	}
	logs := &bytes.Buffer{}
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	mw, err := httpapi.Middleware(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &guard{h: mw(next), logs: logs}
}

func (g *guard) do(t *testing.T, method, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	g.h.ServeHTTP(w, r)
	return w
}

// ok is a handler that answers 200 "ok".
var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// TestMiddlewareRefusesWhatWouldMiscount: policies without namespaces
// (three requests to /b would use up /a's limit of 3), a key source of no
// kind (which fell back to the header any client sets), a claim source
// with no claim (every request a 401), a fail mode of neither kind, a
// constant cost beyond the limit: each refused when the middleware is
// built, once, without a repeated prefix.
func TestMiddlewareRefusesWhatWouldMiscount(t *testing.T) {
	store := sqlitetest.Open(t, sqlite.Config{})
	a := limiter.Policy{Name: "a", Limit: 3, Window: time.Minute}
	b := limiter.Policy{Name: "b", Limit: 100, Window: time.Minute}
	for name, tc := range map[string]struct {
		opts httpapi.Options
		want string
	}{
		"no namespaces":       {httpapi.Options{Rules: []limiter.Rule{{Policy: a, Routes: []string{"/a"}}, {Policy: b, Routes: []string{"/b"}}}}, `share the namespace ""`},
		"a cookie key source": {httpapi.Options{Rules: []limiter.Rule{{Policy: a, Routes: []string{"/a"}, KeySource: limiter.KeySource{Kind: "cookie"}}}}, `key source "cookie" is not header, source-ip or claim`},
		"a claim of no name":  {httpapi.Options{Rules: []limiter.Rule{{Policy: a, Routes: []string{"/a"}, KeySource: limiter.KeySource{Kind: limiter.KeyFromClaim}}}}, "has no claim name"},
		"a claim with spaces": {httpapi.Options{Rules: []limiter.Rule{{Policy: a, Routes: []string{"/a"}, KeySource: limiter.KeySource{Kind: limiter.KeyFromClaim, Claim: "user id"}}}}, "without spaces"},
		"a bogus fail mode":   {httpapi.Options{Rules: []limiter.Rule{{Policy: a, Routes: []string{"/a"}}}, FailMode: "bogus"}, `fail mode "bogus" is not closed or open`},
		"a cost over limit":   {httpapi.Options{Rules: []limiter.Rule{{Policy: a, Routes: []string{"/a"}, Cost: 1000}}}, "cost 1000 is not from 1 to 3"},
		"a bad window":        {httpapi.Options{Rules: []limiter.Rule{{Policy: limiter.Policy{Name: "a", Limit: 1}, Routes: []string{"/a"}}}}, `policy "a": window`},
		"no routes":           {httpapi.Options{Rules: []limiter.Rule{{Policy: a}}}, `policy "a": no routes`},
		"no rules":            {httpapi.Options{}, "no rules: nothing would be counted"},
		"a nil key function":  {httpapi.Options{Rules: []limiter.Rule{{Policy: a, Routes: []string{"/a"}}}, Keys: map[string]httpapi.KeyFunc{"a": nil}}, `Keys["a"] is nil`},
		"a cost both ways": {httpapi.Options{Rules: []limiter.Rule{{Policy: a, Routes: []string{"/a"}, Cost: 2}},
			Costs: map[string]httpapi.CostFunc{"a": func(*http.Request) (int64, error) { return 1, nil }}}, `policy "a" has both a Cost and a CostFunc`},
	} {
		tc.opts.Store = store
		_, err := httpapi.Middleware(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
			continue
		}
		if strings.Count(err.Error(), `policy "a": policy "a"`) > 0 {
			t.Errorf("%s: %v: the prefix is repeated", name, err)
		}
	}
}

// TestMiddlewareRefusesANilStoreWithTheRest: the doc's promise, every
// problem in one error, holds without a store too: no store, and the bad
// window and fail mode beside it. A nil store used to be the only problem
// told, the others found one start later.
func TestMiddlewareRefusesANilStoreWithTheRest(t *testing.T) {
	_, err := httpapi.Middleware(httpapi.Options{Rules: []limiter.Rule{{Policy: limiter.Policy{Name: "a", Limit: 1}, Routes: []string{"/a"}}}, FailMode: "bogus"})
	for _, want := range []string{"no store", `policy "a": window`, `fail mode "bogus"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v, want an error saying %q", err, want)
		}
	}
}

// TestACostThatCouldNeverPassIsRefusedUncounted: a CostFunc's answer
// beyond the limit (here the request's own X-Size) is a 400, and counts
// nothing. It used to be counted: a cost of MaxInt64 stored a count the
// next decision could not read, and every later request of the key was a
// 503 (or, failing open, let through uncounted).
func TestACostThatCouldNeverPassIsRefusedUncounted(t *testing.T) {
	size := func(r *http.Request) (int64, error) { return strconv.ParseInt(r.Header.Get("X-Size"), 10, 64) }
	g := newGuard(t, httpapi.Options{
		Rules: []limiter.Rule{{Policy: limiter.Policy{Name: "upload", Limit: 10, Window: time.Minute, Namespace: "upload"}, Routes: []string{"POST /upload"}}},
		Costs: map[string]httpapi.CostFunc{"upload": size},
	}, ok)
	for n, want := range map[int64]string{
		11:            `The request's cost 11 is more than policy "upload" can ever let through at once, 10.`,
		math.MaxInt64: `The request's cost 9223372036854775807 is not from 1 to 999999999999999.`,
	} {
		w := g.do(t, "POST", "/upload", "X-Client-Key", "x", "X-Size", strconv.FormatInt(n, 10))
		p := lambdatest.WantProblem(t, w, 400, httpapi.TypeInvalidRequest, "/upload")
		if d := p["detail"].(string); d != want {
			t.Errorf("cost %d: %q, want %q", n, d, want)
		}
	}
	for i, want := range []int{200, 200, 429} {
		if w := g.do(t, "POST", "/upload", "X-Client-Key", "x", "X-Size", "5"); w.Code != want {
			t.Fatalf("upload %d of cost 5 after the refusals: %d %s, want %d", i+1, w.Code, w.Body, want)
		}
	}
}

// TestWhatYourFunctionsSayIsNotSentOn: a key or cost function's error is
// logged and not repeated to the client, who may not know what it tells;
// a *Problem it returns (Unauthenticated, BadRequest) is sent as it is.
func TestWhatYourFunctionsSayIsNotSentOn(t *testing.T) {
	p := limiter.Policy{Name: "p", Limit: 5, Window: time.Minute, Namespace: "p"}
	g := newGuard(t, httpapi.Options{
		Rules: []limiter.Rule{{Policy: p, Routes: []string{"/k"}}, {Policy: limiter.Policy{Name: "q", Limit: 5, Window: time.Minute, Namespace: "q"}, Routes: []string{"/c"}}},
		Keys: map[string]httpapi.KeyFunc{"p": func(r *http.Request) (string, error) {
			if r.Header.Get("X-User") == "" {
				return "", httpapi.Unauthenticated("Sign in first.")
			}
			return "", errors.New("sessions table at 10.0.0.7 is down")
		}},
		Costs: map[string]httpapi.CostFunc{"q": func(r *http.Request) (int64, error) {
			if r.Header.Get("X-Items") == "" {
				return 0, httpapi.BadRequest("Say how many items: X-Items.")
			}
			return 0, errors.New(`strconv.ParseInt: parsing "abc": invalid syntax`)
		}},
	}, ok)
	w := g.do(t, "GET", "/k", "X-User", "u")
	if d := lambdatest.WantProblem(t, w, 400, httpapi.TypeInvalidKey, "/k")["detail"].(string); strings.Contains(d, "10.0.0.7") {
		t.Errorf("a key function's error reached the client: %q", d)
	}
	if !strings.Contains(g.logs.String(), "sessions table at 10.0.0.7 is down") {
		t.Errorf("a key function's error is not logged: %s", g.logs)
	}
	w = g.do(t, "GET", "/k")
	if d := lambdatest.WantProblem(t, w, 401, httpapi.TypeUnauthenticated, "/k")["detail"]; d != "Sign in first." || w.Header().Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("Unauthenticated: %v, %v", d, w.Header())
	}
	w = g.do(t, "GET", "/c", "X-Client-Key", "c", "X-Items", "abc")
	if d := lambdatest.WantProblem(t, w, 400, httpapi.TypeInvalidRequest, "/c")["detail"].(string); strings.Contains(d, "ParseInt") {
		t.Errorf("a cost function's error reached the client: %q", d)
	}
	if d := lambdatest.WantProblem(t, g.do(t, "GET", "/c", "X-Client-Key", "c"), 400, httpapi.TypeInvalidRequest, "/c")["detail"]; d != "Say how many items: X-Items." {
		t.Errorf("BadRequest: %v", d)
	}
	for _, line := range strings.Split(strings.TrimSpace(g.logs.String()), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(line), &m)
		if m["decision"] != "refused" {
			t.Errorf("a refused request logs decision %q, want refused: %s", m["decision"], line)
		}
	}
}

// TestTheHandlersPanicIsItsOwn: a panic of the handler behind the
// middleware goes on, to the server or the recovery of your own (it used
// to be turned into the middleware's 500 problem), with the request's
// line logged; the middleware's own faults are still a 500 problem.
func TestTheHandlersPanicIsItsOwn(t *testing.T) {
	g := newGuard(t, httpapi.Options{Rules: []limiter.Rule{{Policy: pingPolicy, Routes: []string{"/boom"}}}},
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("the handler's own") }))
	func() {
		defer func() {
			if v := recover(); v != "the handler's own" {
				t.Errorf("recovered %v, want the handler's panic", v)
			}
		}()
		w := g.do(t, "GET", "/boom", "X-Client-Key", "k")
		t.Errorf("the panic was answered: %d %s", w.Code, w.Body)
	}()
	if !strings.Contains(g.logs.String(), `"path":"/boom"`) {
		t.Errorf("no log line for the request: %s", g.logs)
	}
	// The line says the handler panicked: it read "status":0,
	// "decision":"allowed" and nothing more.
	if !strings.Contains(g.logs.String(), `"panic":true`) {
		t.Errorf("the line does not say the handler panicked: %s", g.logs)
	}
}

// TestStreamingAndUpgradesPassThrough: a handler behind the middleware can
// assert http.Flusher and flush (server-sent events arrive before it
// ends), and http.Hijacker and take the connection (a WebSocket upgrade).
func TestStreamingAndUpgradesPassThrough(t *testing.T) {
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/events", func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "no flusher", 500)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		f.Flush()
		<-release
		io.WriteString(w, "data: two\n\n")
	})
	mux.HandleFunc("/upgrade", func(w http.ResponseWriter, r *http.Request) {
		h, ok := w.(http.Hijacker)
		if !ok {
			http.Error(w, "no hijacker", 500)
			return
		}
		conn, rw, err := h.Hijack()
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: test\r\nConnection: Upgrade\r\n\r\nhello")
		rw.Flush()
	})
	p := limiter.Policy{Name: "ping", Limit: 10, Window: time.Minute}
	g := newGuard(t, httpapi.Options{Rules: []limiter.Rule{{Policy: p, Routes: []string{"/"}}}, Now: time.Now}, mux)
	srv := httptest.NewServer(g.h)
	defer srv.Close()
	res, err := http.Get(srv.URL + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	close(release)
	if err != nil || line != "data: one\n" || res.Header.Get("RateLimit") == "" {
		t.Errorf("first event before the handler ended: %q, %v, headers %v", line, err, res.Header)
	}
	conn, err := (&net.Dialer{}).DialContext(context.Background(), "tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute)) // a kept-alive 500 would never end the read
	io.WriteString(conn, "GET /upgrade HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n")
	got, _ := io.ReadAll(conn)
	if !strings.HasPrefix(string(got), "HTTP/1.1 101") || !strings.HasSuffix(string(got), "hello") {
		t.Errorf("upgrade: %q, want 101 and the handler's own bytes", got)
	}
}

// TestOnlyTheRouteItselfIsCounted: a request ServeMux would redirect (to
// a subtree's trailing slash, or to a cleaned path) is not yet the route:
// the middleware redirects it as ServeMux would, uncounted, whatever the
// handler behind it, and only the request it is redirected to counts. A
// handler that is not a ServeMux would otherwise serve "//orders" as
// "/orders" without its limit; and a host differs from a rule's only in
// case or a trailing dot is the rule's host.
func TestOnlyTheRouteItselfIsCounted(t *testing.T) {
	store := sqlitetest.Open(t, sqlite.Config{})
	served := 0
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served++ })
	p := limiter.Policy{Name: "ping", Limit: 10, Window: time.Minute}
	orders := limiter.Policy{Name: "orders", Limit: 2, Window: time.Minute, Namespace: "orders"}
	g := newGuard(t, httpapi.Options{Store: store, Rules: []limiter.Rule{
		{Policy: p, Routes: []string{"/api/"}},
		{Policy: orders, Routes: []string{"POST /orders", "POST api.example.com/v2/orders"}},
	}}, plain)
	for _, target := range []string{"/api", "/api//x", "/api/./x", "//orders", "/x/../orders", "/./orders"} {
		method := map[bool]string{true: "POST", false: "GET"}[strings.HasSuffix(target, "orders")]
		if w := g.do(t, method, target, "X-Client-Key", "k"); w.Code/100 != 3 || w.Header().Get("RateLimit") != "" {
			t.Errorf("%s %s: %d %v, want ServeMux's redirect, uncounted", method, target, w.Code, w.Header())
		}
	}
	if served != 0 {
		t.Errorf("the handler behind served %d requests its rules never counted", served)
	}
	if w := g.do(t, "GET", "/api/x", "X-Client-Key", "k"); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "9" {
		t.Errorf("GET /api/x: %d, remaining %q; want 200 and the first count", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	for i, host := range []string{"API.example.com", "api.example.com.", "Api.Example.Com:443"} {
		r := httptest.NewRequest("POST", "/v2/orders", nil)
		r.Host = host
		r.Header.Set("X-Client-Key", "h")
		w := httptest.NewRecorder()
		g.h.ServeHTTP(w, r)
		if want := []int{200, 200, 429}[i]; w.Code != want {
			t.Errorf("POST %s/v2/orders: %d, want %d: counted under orders", host, w.Code, want)
		}
	}
}

// countingMetrics counts what a Metrics receives.
type countingMetrics struct{ decisions, storeErrors atomic.Int64 }

func (m *countingMetrics) Decision(time.Time, string, string, string, string, time.Duration) {
	m.decisions.Add(1)
}
func (m *countingMetrics) StoreError(time.Time, string, string) { m.storeErrors.Add(1) }

// TestANilMetricsRecordsNothing: Options.Metrics holding a nil pointer (a
// *metrics.EMF left unset) is no Metrics, as nil is: requests are served
// and counted. It used to answer every counted request 500, after counting
// it, without reaching the handler.
func TestANilMetricsRecordsNothing(t *testing.T) {
	var m *countingMetrics
	g := newGuard(t, httpapi.Options{Rules: []limiter.Rule{{Policy: pingPolicy, Routes: []string{"/ping"}}}, Metrics: m}, ok)
	if w := g.do(t, "GET", "/ping", "X-Client-Key", "k"); w.Code != 200 || w.Body.String() != "ok" || w.Header().Get("X-RateLimit-Remaining") == "" {
		t.Errorf("GET /ping with a nil *Metrics: %d %q, want the handler's 200 with the count's headers", w.Code, w.Body)
	}
}

// TestAClientThatLeftIsNotAStoreFault: a request whose client went away
// before the store answered is logged "cancelled", at INFO, and is not
// measured as a store error (which the store-fault alarm counts).
func TestAClientThatLeftIsNotAStoreFault(t *testing.T) {
	m := &countingMetrics{}
	g := newGuard(t, httpapi.Options{Rules: []limiter.Rule{{Policy: pingPolicy, Routes: []string{"/ping"}}}, Metrics: m, FailMode: limiter.FailOpen},
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("a cancelled request reached the handler") }))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, "GET", "/ping", nil)
	r.Header.Set("X-Client-Key", "k")
	g.h.ServeHTTP(httptest.NewRecorder(), r)
	var line map[string]any
	json.Unmarshal(g.logs.Bytes(), &line)
	if line["decision"] != "cancelled" || line["level"] != "INFO" || line["fault"] != nil {
		t.Errorf("log line %v, want decision cancelled at INFO, no fault", line)
	}
	if n := m.storeErrors.Load(); n != 0 {
		t.Errorf("%d store errors measured for a client that left", n)
	}
}

// TestARouteOfYourMuxIsNotRedirected is the program: a ServeMux
// with an exact "/api" and a subtree "/api/", behind a rule that guards
// "/api/" alone. GET /api reaches the exact route, 200, uncounted (it used
// to be the middleware's 307 to /api/: the route was unreachable); GET
// /api/x is counted.
func TestARouteOfYourMuxIsNotRedirected(t *testing.T) {
	exact := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "exact") }
	subtree := func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "subtree") }
	mux := http.NewServeMux()
	mux.HandleFunc("/api", exact) // not guarded
	mux.HandleFunc("/api/", subtree)
	p := limiter.Policy{Name: "api", Limit: 10, Window: time.Minute}
	g := newGuard(t, httpapi.Options{Rules: []limiter.Rule{{Policy: p, Routes: []string{"/api/"}}}}, mux)
	for range 2 {
		w := g.do(t, "GET", "/api", "X-Client-Key", "k")
		if w.Code != 200 || w.Body.String() != "exact" || w.Header().Get("RateLimit") != "" {
			t.Fatalf("GET /api: %d %q, Location %q, RateLimit %q; want 200 from exact, uncounted",
				w.Code, w.Body, w.Header().Get("Location"), w.Header().Get("RateLimit"))
		}
	}
	if g.logs.Len() != 0 {
		t.Errorf("GET /api, which no rule guards, was logged as counted: %s", g.logs)
	}
	w := g.do(t, "GET", "/api/x", "X-Client-Key", "k")
	if w.Code != 200 || w.Body.String() != "subtree" || w.Header().Get("X-RateLimit-Remaining") != "9" {
		t.Errorf("GET /api/x: %d %q, remaining %q; want 200 from subtree, the key's first count", w.Code, w.Body, w.Header().Get("X-RateLimit-Remaining"))
	}
}

// TestAServeMuxBehindRoutesForItself: behind the middleware a ServeMux
// routes as it would alone. "/v1" beside a rule's "/v1/{$}" is served, not
// redirected, and not counted; a request the mux would redirect itself (to
// a subtree's trailing slash, or to a cleaned path) is its redirect,
// uncounted, and the request it is redirected to is counted.
func TestAServeMuxBehindRoutesForItself(t *testing.T) {
	answer := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) }
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1", answer("v1"))
	mux.HandleFunc("/v1/{$}", answer("v1 root"))
	mux.HandleFunc("/docs/", answer("docs"))
	p := limiter.Policy{Name: "api", Limit: 10, Window: time.Minute}
	g := newGuard(t, httpapi.Options{Rules: []limiter.Rule{{Policy: p, Routes: []string{"/v1/{$}", "/docs/"}}}}, mux)
	if w := g.do(t, "GET", "/v1", "X-Client-Key", "k"); w.Code != 200 || w.Body.String() != "v1" || w.Header().Get("RateLimit") != "" {
		t.Errorf("GET /v1: %d %q, Location %q, RateLimit %q; want 200 from the mux's /v1, uncounted",
			w.Code, w.Body, w.Header().Get("Location"), w.Header().Get("RateLimit"))
	}
	for _, tc := range []struct{ target, location string }{{"/docs", "/docs/"}, {"//docs/x", "/docs/x"}, {"/v1/../docs/", "/docs/"}} {
		w := g.do(t, "GET", tc.target, "X-Client-Key", "k")
		if w.Code/100 != 3 || w.Header().Get("Location") != tc.location || w.Header().Get("RateLimit") != "" {
			t.Errorf("GET %s: %d, Location %q, RateLimit %q; want the mux's redirect to %s, uncounted",
				tc.target, w.Code, w.Header().Get("Location"), w.Header().Get("RateLimit"), tc.location)
		}
	}
	if g.logs.Len() != 0 {
		t.Errorf("requests no rule counted were logged: %s", g.logs)
	}
	for i, tc := range []struct{ target, body string }{{"/v1/", "v1 root"}, {"/docs/", "docs"}, {"/docs/x", "docs"}} {
		w := g.do(t, "GET", tc.target, "X-Client-Key", "k")
		if want := strconv.Itoa(9 - i); w.Code != 200 || w.Body.String() != tc.body || w.Header().Get("X-RateLimit-Remaining") != want {
			t.Errorf("GET %s: %d %q, remaining %q; want 200 %q, counted (%s left)", tc.target, w.Code, w.Body, w.Header().Get("X-RateLimit-Remaining"), tc.body, want)
		}
	}
	// A rule that guards everything: what the mux redirects is still not
	// counted (its rules alone would count /docs); what it answers 404
	// is, as the rules say.
	all := newGuard(t, httpapi.Options{Rules: []limiter.Rule{{Policy: p, Routes: []string{"/"}}}}, mux)
	if w := all.do(t, "GET", "/docs", "X-Client-Key", "k"); w.Code/100 != 3 || w.Header().Get("RateLimit") != "" {
		t.Errorf(`GET /docs under "/": %d, RateLimit %q; want the mux's redirect, uncounted`, w.Code, w.Header().Get("RateLimit"))
	}
	if w := all.do(t, "GET", "/nowhere", "X-Client-Key", "k"); w.Code != 404 || w.Header().Get("X-RateLimit-Remaining") != "9" {
		t.Errorf(`GET /nowhere under "/": %d, remaining %q; want the mux's 404, counted first`, w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
}

// t0 is 2026-01-01T00:00:00Z; the tests' clock reads t0 + 18s, 42 s before
// the end of a 60 s window.
var (
	t0  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now = t0.Add(18 * time.Second)
)

// pingPolicy is the /ping policy of the tests, the seed's defaults.
var pingPolicy = limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}

// TestTiersByAFunctionOfTheRequest: Options.Tiers picks each request's
// tier (here, by an API key looked up in the caller's accounts): the
// handler sees the outcome under the tier's limit, and the headers carry
// it; a nil function is refused, as a nil key function is.
func TestTiersByAFunctionOfTheRequest(t *testing.T) {
	plans := map[string]string{"k-pro": "pro", "k-free": "free"}
	api := limiter.Policy{Name: "api", Limit: 1, Window: time.Minute, Namespace: "api", Tiers: map[string]limiter.Tier{"pro": {Limit: 3}}}
	var tiers []string
	g := newGuard(t, httpapi.Options{
		Rules: []limiter.Rule{{Policy: api, Routes: []string{"/"}}},
		Keys:  map[string]httpapi.KeyFunc{"api": func(r *http.Request) (string, error) { return r.Header.Get("X-Api-Key"), nil }},
		Tiers: map[string]func(*http.Request) (string, error){"api": func(r *http.Request) (string, error) {
			return plans[r.Header.Get("X-Api-Key")], nil
		}},
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o, _ := httpapi.OutcomeFrom(r.Context())
		tiers = append(tiers, o.Decisions[0].Tier)
	}))
	for _, tc := range []struct {
		key   string
		codes []int
		limit string
	}{{"k-pro", []int{200, 200, 200, 429}, "3"}, {"k-free", []int{200, 429}, "1"}} {
		for i, want := range tc.codes {
			r := httptest.NewRequest("GET", "/orders", nil)
			r.Header.Set("X-Api-Key", tc.key)
			w := httptest.NewRecorder()
			g.h.ServeHTTP(w, r)
			if w.Code != want || w.Header().Get("X-RateLimit-Limit") != tc.limit {
				t.Errorf("%s %d: %d, X-RateLimit-Limit %s; want %d, %s", tc.key, i+1, w.Code, w.Header().Get("X-RateLimit-Limit"), want, tc.limit)
			}
		}
	}
	if fmt.Sprint(tiers) != "[pro pro pro ]" {
		t.Errorf("the handler saw tiers %q, want pro three times, then the default", tiers)
	}
	_, err := httpapi.Middleware(httpapi.Options{Store: sqlitetest.Open(t, sqlite.Config{}), Rules: []limiter.Rule{{Policy: api, Routes: []string{"/"}}},
		Tiers: map[string]func(*http.Request) (string, error){"api": nil}})
	if err == nil || !strings.Contains(err.Error(), `Tiers["api"] is nil`) {
		t.Errorf("a nil tier function: %v", err)
	}
}

// TestTiersNothingNamesAreRefused: a policy with tiers behind the
// middleware, with no TierClaim, no TierHeader and no tier function, could
// never apply one of them: every request would get the policy's own limit
// whatever its plan, with nothing said. The middleware refuses it, as it
// refuses a tier source without tiers, and so does Limit, which has no way
// to name a tier; with any of the three it is taken.
func TestTiersNothingNamesAreRefused(t *testing.T) {
	api := limiter.Policy{Name: "api", Limit: 1, Window: time.Minute, Namespace: "api", Tiers: map[string]limiter.Tier{"pro": {Limit: 3}}}
	store := sqlitetest.Open(t, sqlite.Config{})
	_, err := httpapi.Middleware(httpapi.Options{Store: store, Rules: []limiter.Rule{{Policy: api, Routes: []string{"/"}}}})
	if err == nil || !strings.Contains(err.Error(), `policy "api" has tiers, but nothing names one`) {
		t.Errorf("tiers that nothing names: %v, want them refused", err)
	}
	if _, err := httpapi.Limit(store, api, httpapi.BySourceIP); err == nil || !strings.Contains(err.Error(), `policy "api" has tiers, but nothing names one`) {
		t.Errorf("Limit of a policy with tiers: %v, want it refused", err)
	}
	for name, opts := range map[string]httpapi.Options{
		"TierClaim":  {Rules: []limiter.Rule{{Policy: api, Routes: []string{"/"}, TierClaim: "plan"}}},
		"TierHeader": {Rules: []limiter.Rule{{Policy: api, Routes: []string{"/"}, TierHeader: "X-Plan"}}},
		"Tiers": {Rules: []limiter.Rule{{Policy: api, Routes: []string{"/"}}},
			Tiers: map[string]func(*http.Request) (string, error){"api": func(*http.Request) (string, error) { return "pro", nil }}},
	} {
		opts.Store = store
		if _, err := httpapi.Middleware(opts); err != nil {
			t.Errorf("tiers named by %s: %v", name, err)
		}
	}
}

// TestAProblemWithoutAnErrorStatusIsA500: a key function's *Problem whose
// Status is no 4xx or 5xx (left zero, say) is the function's bug, not an
// answer: it is a 500 problem. It used to be sent with that status: 0,
// 99 and 1000 as a 200 with an empty body, 200 and 302 as they were; the
// handler did not run, so a client saw success that never happened.
func TestAProblemWithoutAnErrorStatusIsA500(t *testing.T) {
	for _, status := range []int{0, 99, 200, 302, 1000} {
		ran := false
		g := newGuard(t, httpapi.Options{
			Rules: []limiter.Rule{{Policy: pingPolicy, Routes: []string{"/k"}}},
			Keys: map[string]httpapi.KeyFunc{"ping": func(*http.Request) (string, error) {
				return "", &httpapi.Problem{Title: "t", Status: status}
			}},
		}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
		lambdatest.WantProblem(t, g.do(t, "GET", "/k"), 500, "about:blank", "/k")
		if ran {
			t.Errorf("status %d: the handler ran", status)
		}
		// The 500 is a bug of the key function's: its line says so, at
		// ERROR, with what was wrong. It used to be an INFO line with no
		// cause, "refused".
		var line map[string]any
		json.Unmarshal(g.logs.Bytes(), &line)
		cause := fmt.Sprintf("key of ping: a *Problem with status %d, not 4xx or 5xx", status)
		if errs, _ := line["func_error"].([]any); line["level"] != "ERROR" || len(errs) != 1 || !strings.HasPrefix(fmt.Sprint(errs[0]), cause) {
			t.Errorf("status %d: log line %v, want it at ERROR with func_error %q", status, line, cause)
		}
	} // A 500 of the handler behind is the handler's business: its line
	// stays at INFO.
	g := newGuard(t, httpapi.Options{Rules: []limiter.Rule{{Policy: pingPolicy, Routes: []string{"/k"}}}},
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	g.do(t, "GET", "/k", "X-Client-Key", "k")
	var line map[string]any
	json.Unmarshal(g.logs.Bytes(), &line)
	if line["level"] != "INFO" || line["status"] != 500.0 || line["decision"] != "allowed" {
		t.Errorf("the handler's own 500: log line %v, want it at INFO, allowed", line)
	}
}

// TestTheMiddlewareKeepsItsOwnTiers: the tiers a Middleware was built
// with are its own: a change to the caller's Policy.Tiers map afterwards,
// which was never validated (a limit of 0 made every request a 503) and
// races with requests, changes nothing. It used to be shared.
func TestTheMiddlewareKeepsItsOwnTiers(t *testing.T) {
	tiers := map[string]limiter.Tier{"pro": {Limit: 3}}
	api := limiter.Policy{Name: "api", Limit: 1, Window: time.Minute, Namespace: "api", Tiers: tiers}
	g := newGuard(t, httpapi.Options{Rules: []limiter.Rule{{Policy: api, Routes: []string{"/"}, TierHeader: "X-Plan"}}}, ok)
	tiers["pro"] = limiter.Tier{Limit: 0}
	tiers["gold"] = limiter.Tier{Limit: 1000}
	for i, want := range []int{200, 200, 200, 429} {
		w := g.do(t, "GET", "/", "X-Client-Key", "k", "X-Plan", "pro")
		if w.Code != want || w.Header().Get("X-RateLimit-Limit") != "3" {
			t.Errorf("pro %d: %d, X-RateLimit-Limit %s; want %d, 3", i+1, w.Code, w.Header().Get("X-RateLimit-Limit"), want)
		}
	}
	if w := g.do(t, "GET", "/", "X-Client-Key", "g", "X-Plan", "gold"); w.Header().Get("X-RateLimit-Limit") != "1" {
		t.Errorf("a tier added afterwards: X-RateLimit-Limit %s, want the policy's own 1", w.Header().Get("X-RateLimit-Limit"))
	}
}
