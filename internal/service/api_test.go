package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/rejectcache"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/memory"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// t0 is 2026-01-01T00:00:00Z; the tests' clock reads t0 + 18s, 42 s before
// the end of a 60 s window.
var (
	t0  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now = t0.Add(18 * time.Second)
)

// pingPolicy is the /ping policy of the tests, the seed's defaults.
var pingPolicy = limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}

// pingRules are the rules of pingPolicy alone on /ping, its keys found by
// ks.
func pingRules(ks limiter.KeySource) []limiter.Rule {
	return []limiter.Rule{{Policy: pingPolicy, KeySource: ks, Routes: []string{"/ping"}}}
}

type fixture struct {
	api   *service.API
	store *sqlite.Store
	logs  *bytes.Buffer
}

// newFixture builds an API from opts, with what it leaves out filled in: a
// fresh SQLite store, pingPolicy keyed by the header, the tests' clock, and
// JSON logs in the fixture's buffer.
func newFixture(t *testing.T, opts service.Options) *fixture {
	t.Helper()
	if opts.Store == nil {
		opts.Store = sqlitetest.Open(t, sqlite.Config{BusyTimeout: time.Second})
	}
	if len(opts.Rules) == 0 {
		opts.Rules = pingRules(limiter.KeySource{Kind: limiter.KeyFromHeader})
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return now }
	}
	logs := &bytes.Buffer{}
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	st, _ := opts.Store.(*sqlite.Store)
	return &fixture{api: lambdatest.NewAPI(t, opts), store: st, logs: logs}
}

func (f *fixture) do(t *testing.T, method, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	f.api.ServeHTTP(w, r)
	return w
}

func decode(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	return lambdatest.Decode(t, w)
}

func wantProblem(t *testing.T, w *httptest.ResponseRecorder, status int, typ, path string) map[string]any {
	t.Helper()
	return lambdatest.WantProblem(t, w, status, typ, path)
}

func TestPingAllowsThreeThenRejectsWithHeaders(t *testing.T) {
	f := newFixture(t, service.Options{})
	for i, want := range []struct {
		status    int
		remaining string
	}{{200, "2"}, {200, "1"}, {200, "0"}, {429, "0"}} {
		w := f.do(t, "GET", "/ping", "X-Client-Key", "alice")
		if w.Code != want.status {
			t.Fatalf("request %d: status %d, want %d", i+1, w.Code, want.status)
		}
		h := w.Header()
		wantHeaders := map[string]string{
			"RateLimit-Policy":      `"ping";q=3;w=60`,
			"RateLimit":             `"ping";r=` + want.remaining + `;t=42`,
			"X-RateLimit-Limit":     "3",
			"X-RateLimit-Remaining": want.remaining,
			"X-RateLimit-Reset":     "1767225660",
		}
		for k, v := range wantHeaders {
			if got := h.Get(k); got != v {
				t.Errorf("request %d: %s = %q, want %q", i+1, k, got, v)
			}
		}
		if i == 1 {
			body := decode(t, w)
			if body["key"] != "alice" || body["count"] != float64(2) || body["limit"] != float64(3) || body["remaining"] != float64(1) ||
				body["window_start"] != "2026-01-01T00:00:00Z" || body["reset_seconds"] != float64(42) {
				t.Errorf("200 body = %v", body)
			}
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Errorf("200 Content-Type = %q", ct)
			}
		}
		if want.status == 429 {
			p := wantProblem(t, w, 429, service.TypeRateLimited, "/ping")
			if p["detail"] != "Rate limit of 3 requests per 60s exceeded for key 'alice'." {
				t.Errorf("429 detail = %q", p["detail"])
			}
			if ra := h.Get("Retry-After"); ra != "42" {
				t.Errorf("Retry-After = %q, want 42", ra)
			}
		}
	}
	// A different key has its own counter.
	if w := f.do(t, "GET", "/ping", "X-Client-Key", "bob"); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("other key: %d, remaining %s", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
}

func TestStatusReadsWithoutCounting(t *testing.T) {
	f := newFixture(t, service.Options{})
	f.do(t, "GET", "/ping", "X-Client-Key", "alice")
	f.do(t, "GET", "/ping", "X-Client-Key", "alice")
	for range 3 {
		w := f.do(t, "GET", "/status?key=alice")
		body := decode(t, w)
		if w.Code != 200 || body["key"] != "alice" || body["count"] != float64(2) || body["limit"] != float64(3) ||
			body["remaining"] != float64(1) || body["window_start"] != "2026-01-01T00:00:00Z" || body["reset_seconds"] != float64(42) {
			t.Fatalf("status = %d %v", w.Code, body)
		}
	}
	// Reading did not count: the third ping is still allowed.
	if w := f.do(t, "GET", "/ping", "X-Client-Key", "alice"); w.Code != 200 {
		t.Errorf("ping after status reads: %d, want 200", w.Code)
	}
	// Unicode and escaped keys round-trip.
	f.do(t, "GET", "/ping", "X-Client-Key", "clé 鍵")
	if body := decode(t, f.do(t, "GET", "/status?key=cl%C3%A9+%E9%8D%B5")); body["count"] != float64(1) || body["key"] != "clé 鍵" {
		t.Errorf("unicode status = %v", body)
	}
}

func TestStatusRejectsBadQueries(t *testing.T) {
	f := newFixture(t, service.Options{})
	for _, target := range []string{
		"/status", "/status?key=", "/status?other=1", "/status?key=a&key=b", "/status?key=%zz",
		"/status?key=" + strings.Repeat("x", 257), "/status?key=a%00b", "/status?key=%ff",
	} {
		w := f.do(t, "GET", target)
		if w.Code != 400 || w.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: %d %s, want a 400 problem", target, w.Code, w.Body)
		}
	}
}

func TestUnknownPathAndWrongMethod(t *testing.T) {
	f := newFixture(t, service.Options{})
	wantProblem(t, f.do(t, "GET", "/nope"), 404, service.TypeBlank, "/nope")
	wantProblem(t, f.do(t, "GET", "/ping/"), 404, service.TypeBlank, "/ping/")
	for _, m := range []string{"POST", "PUT", "DELETE", "OPTIONS"} {
		w := f.do(t, m, "/ping")
		wantProblem(t, w, 405, service.TypeBlank, "/ping")
		if w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s /ping: Allow = %q, want GET, HEAD", m, w.Header().Get("Allow"))
		}
	}
	// A function that serves only /ping does not answer /status.
	only := newFixture(t, service.Options{Routes: []string{service.RoutePing}})
	wantProblem(t, only.do(t, "GET", "/status?key=a"), 404, service.TypeBlank, "/status")
}

// TestProblemInstanceIsTheRequestPath: a problem's instance is the path
// as the request wrote it, escaped, a URI reference naming what was asked
// for: it used to be the decoded path, in which /nope%2Fx read as /nope/x,
// /a%3Fb as /a?b (a query) and %20 as a raw space. An authority-form
// CONNECT, which has no path, names its authority as a network-path
// reference; it used to have no instance and the detail "No route for .".
func TestProblemInstanceIsTheRequestPath(t *testing.T) {
	f := newFixture(t, service.Options{})
	for target, want := range map[string]string{
		"/nope%2Fx":   "/nope%2Fx",
		"/a%3Fb":      "/a%3Fb",
		"/%20a":       "/%20a",
		"/a%00b":      "/a%00b",
		"/ping%2F":    "/ping%2F",
		"/caf%C3%A9":  "/caf%C3%A9",
		"/café":       "/caf%C3%A9",
		"/a%2fb?x=%2": "/a%2fb",
	} {
		wantProblem(t, f.do(t, "GET", target), 404, service.TypeBlank, want)
	}
	// Truncated, it stays a URI reference: no escape is cut in two and
	// the ellipsis is escaped too.
	long := "/" + strings.Repeat("%2F", 100)
	p := decode(t, f.do(t, "GET", long))
	in, _ := p["instance"].(string)
	if _, err := url.ParseRequestURI(in); err != nil || !strings.HasPrefix(long, strings.TrimSuffix(in, "%E2%80%A6")) || !strings.HasSuffix(in, "%E2%80%A6") || len(in) > 200+len("%E2%80%A6") {
		t.Errorf("instance of a %d-byte path: %q (%v), want its first 200 bytes or fewer, whole escapes, then an escaped ellipsis", len(long), in, err)
	}
	if d, _ := p["detail"].(string); !strings.HasSuffix(d, "….") || strings.Contains(d, "%E2%80%A6") {
		t.Errorf("detail of a %d-byte path: %q, want it cut short with a plain ellipsis", len(long), d)
	}
	w := f.do(t, "CONNECT", "127.0.0.1:3101")
	p = wantProblem(t, w, 404, service.TypeBlank, "//127.0.0.1:3101")
	if d, _ := p["detail"].(string); !strings.Contains(d, "127.0.0.1:3101") {
		t.Errorf("CONNECT 127.0.0.1:3101: detail %q does not name the target", d)
	}
}

// TestHeadIsAGetWithoutABody: HEAD /ping and HEAD /status answer as GET
// would, status and headers, counting as GET counts, without the body
// (RFC 9110, section 9.3.2; net/http's ServeMux serves a GET pattern's
// HEAD alike). It used to be a 405 whose Allow said GET, which in HTTP
// takes HEAD with it; and a 405 names HEAD among what the route takes.
func TestHeadIsAGetWithoutABody(t *testing.T) {
	f := newFixture(t, service.Options{})
	for i, want := range []int{200, 200, 200, 429} {
		w := f.do(t, "HEAD", "/ping", "X-Client-Key", "k")
		if w.Code != want || w.Body.Len() != 0 {
			t.Fatalf("HEAD /ping %d: %d %q, want %d without a body", i+1, w.Code, w.Body, want)
		}
		wantHeader(t, w, "RateLimit", fmt.Sprintf(`"ping";r=%d;t=42`, max(2-i, 0)))
		wantHeader(t, w, "Content-Type", map[bool]string{true: "application/json", false: "application/problem+json"}[want == 200])
		if want == 429 {
			wantHeader(t, w, "Retry-After", "42")
		}
	}
	w := f.do(t, "HEAD", "/status?key=k")
	if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("HEAD /status: %d %q %v, want 200 without a body", w.Code, w.Body, w.Header())
	}
	if body := decode(t, f.do(t, "GET", "/status?key=k")); body["count"] != float64(4) {
		t.Errorf("count after 4 HEADs = %v, want 4: a HEAD counts as its GET", body["count"])
	}
	if w := f.do(t, "HEAD", "/status"); w.Code != 400 || w.Body.Len() != 0 {
		t.Errorf("HEAD /status without a key: %d %q, want 400 without a body", w.Code, w.Body)
	}
	if line := f.lastLogLine(t); !strings.Contains(line, `"method":"HEAD"`) || !strings.Contains(line, `"status":400`) {
		t.Errorf("log line %s, want the HEAD's", line)
	}
	w = f.do(t, "HEAD", "/check")
	if w.Code != 405 || w.Header().Get("Allow") != "POST" || w.Body.Len() != 0 {
		t.Errorf("HEAD /check: %d, Allow %q, %q; want 405, Allow: POST, no body", w.Code, w.Header().Get("Allow"), w.Body)
	}
}

func TestClientKeySources(t *testing.T) {
	t.Run("header falls back to 127.0.0.1", func(t *testing.T) {
		f := newFixture(t, service.Options{})
		f.do(t, "GET", "/ping")
		f.do(t, "GET", "/ping", "X-Client-Key", "")
		if body := decode(t, f.do(t, "GET", "/status?key=127.0.0.1")); body["count"] != float64(2) {
			t.Errorf("fallback key count = %v, want 2", body["count"])
		}
	})
	t.Run("duplicate headers are one key, joined as API Gateway joins them", func(t *testing.T) {
		f := newFixture(t, service.Options{})
		if body := decode(t, f.do(t, "GET", "/ping", "X-Client-Key", "a", "X-Client-Key", "b")); body["key"] != "a,b" {
			t.Errorf("key = %v, want a,b", body["key"])
		}
	})
	t.Run("source-ip uses the connection, never X-Forwarded-For", func(t *testing.T) {
		f := newFixture(t, service.Options{Rules: pingRules(limiter.KeySource{Kind: limiter.KeyFromSourceIP})})
		body := decode(t, f.do(t, "GET", "/ping", "X-Forwarded-For", "1.2.3.4", "X-Client-Key", "forged"))
		if body["key"] != "192.0.2.1" { // httptest's RemoteAddr
			t.Errorf("key = %v, want the peer address 192.0.2.1", body["key"])
		}
	})
	t.Run("claim", func(t *testing.T) {
		claims := map[string]string{}
		f := newFixture(t, service.Options{
			Rules:  pingRules(limiter.KeySource{Kind: limiter.KeyFromClaim, Claim: "sub"}),
			Caller: func(*http.Request) service.Caller { return service.Caller{Claims: claims} },
		})
		w := f.do(t, "GET", "/ping", "X-Client-Key", "forged")
		wantProblem(t, w, 401, service.TypeUnauthenticated, "/ping")
		if w.Header().Get("WWW-Authenticate") == "" {
			t.Error("401 without WWW-Authenticate")
		}
		claims["sub"] = "user-42"
		if body := decode(t, f.do(t, "GET", "/ping", "X-Client-Key", "forged")); body["key"] != "user-42" {
			t.Errorf("key = %v, want the claim user-42", body["key"])
		}
	})
}

func TestInvalidKeysAre400(t *testing.T) {
	f := newFixture(t, service.Options{})
	for _, key := range []string{strings.Repeat("k", 257), "a\x01b", "\xff"} {
		wantProblem(t, f.do(t, "GET", "/ping", "X-Client-Key", key), 400, service.TypeInvalidKey, "/ping")
	}
	if w := f.do(t, "GET", "/ping", "X-Client-Key", strings.Repeat("k", 256)); w.Code != 200 {
		t.Errorf("256-byte key: %d, want 200", w.Code)
	}
}

// brokenStore is a real SQLite store whose directory does not exist.
func brokenStore(t *testing.T) *sqlite.Store { return sqlitetest.Broken(t) }

func TestStoreFailureFollowsFailMode(t *testing.T) {
	t.Run("closed", func(t *testing.T) {
		f := newFixture(t, service.Options{Store: brokenStore(t), FailMode: limiter.FailClosed})
		w := f.do(t, "GET", "/ping", "X-Client-Key", "alice")
		wantProblem(t, w, 503, service.TypeStoreUnavailable, "/ping")
		if w.Header().Get("Retry-After") != "5" {
			t.Errorf("Retry-After = %q, want 5", w.Header().Get("Retry-After"))
		}
		if strings.Contains(w.Body.String(), "missing") || strings.Contains(w.Body.String(), "sqlite") {
			t.Errorf("503 body leaks internals: %s", w.Body)
		}
		if !strings.Contains(f.logs.String(), `"level":"WARN"`) || !strings.Contains(f.logs.String(), "missing") {
			t.Errorf("the store error is not logged: %s", f.logs)
		}
	})
	t.Run("open", func(t *testing.T) {
		f := newFixture(t, service.Options{Store: brokenStore(t), FailMode: limiter.FailOpen})
		w := f.do(t, "GET", "/ping", "X-Client-Key", "alice")
		body := decode(t, w)
		if w.Code != 200 || body["degraded"] != true || body["count"] != nil || body["key"] != "alice" {
			t.Errorf("fail open: %d %v", w.Code, body)
		}
		if !strings.Contains(f.logs.String(), `"decision":"degraded"`) {
			t.Errorf("fail open not logged as degraded: %s", f.logs)
		}
	})
	t.Run("status is 503 in either mode", func(t *testing.T) {
		f := newFixture(t, service.Options{Store: brokenStore(t), FailMode: limiter.FailOpen})
		wantProblem(t, f.do(t, "GET", "/status?key=alice"), 503, service.TypeStoreUnavailable, "/status")
	})
}

func TestOneLogLinePerRequest(t *testing.T) {
	f := newFixture(t, service.Options{Caller: func(*http.Request) service.Caller {
		return service.Caller{RequestID: "apigw-1", LambdaRequestID: "lambda-1"}
	}})
	f.do(t, "GET", "/ping", "X-Client-Key", "alice")
	f.do(t, "GET", "/nope")
	lines := strings.Split(strings.TrimSpace(f.logs.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d log lines, want 2:\n%s", len(lines), f.logs)
	}
	var entry map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &entry); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"msg": "request", "key": "alice", "decision": "allowed", "count": float64(1),
		"status": float64(200), "request_id": "apigw-1", "lambda_request_id": "lambda-1", "path": "/ping"} {
		if entry[k] != v {
			t.Errorf("log %s = %v, want %v", k, entry[k], v)
		}
	}
	if _, ok := entry["latency_ms"].(float64); !ok {
		t.Errorf("log has no latency_ms: %v", entry)
	}
}

// panicStore stands for a bug in a store: it panics.
type panicStore struct{ limiter.Store }

func (panicStore) Allow(context.Context, limiter.Attempt) (limiter.Outcome, error) { panic("bug") }

func TestPanicBecomesA500Problem(t *testing.T) {
	f := newFixture(t, service.Options{Store: panicStore{}})
	p := wantProblem(t, f.do(t, "GET", "/ping"), 500, service.TypeBlank, "/ping")
	if strings.Contains(p["detail"].(string), "bug") {
		t.Errorf("500 detail leaks the panic: %v", p["detail"])
	}
	if !strings.Contains(f.logs.String(), "goroutine") {
		t.Errorf("the stack is not logged")
	}
}

func TestDenialFromMemoryHasTheSameAnswer(t *testing.T) {
	s := sqlitetest.Open(t, sqlite.Config{})
	f := newFixture(t, service.Options{Store: rejectcache.New(s, 0)})
	for range 3 {
		f.do(t, "GET", "/ping", "X-Client-Key", "alice")
	}
	fromStore := f.do(t, "GET", "/ping", "X-Client-Key", "alice")
	fromMemory := f.do(t, "GET", "/ping", "X-Client-Key", "alice")
	for _, h := range []string{"Retry-After", "RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Content-Type"} {
		if a, b := fromStore.Header().Get(h), fromMemory.Header().Get(h); a != b || a == "" {
			t.Errorf("%s: %q from the store, %q from memory", h, a, b)
		}
	}
	if fromStore.Code != 429 || fromMemory.Code != 429 || fromStore.Body.String() != fromMemory.Body.String() {
		t.Errorf("answers differ: %d %s / %d %s", fromStore.Code, fromStore.Body, fromMemory.Code, fromMemory.Body)
	}
	lines := strings.Split(strings.TrimSpace(f.logs.String()), "\n")
	if !strings.Contains(lines[len(lines)-1], `"from_memory":true`) || strings.Contains(lines[len(lines)-2], "from_memory") {
		t.Errorf("log lines do not tell the two apart:\n%s\n%s", lines[len(lines)-2], lines[len(lines)-1])
	}
	if u, _ := s.Usage(context.Background(), pingPolicy, "alice", now); u.Count != 4 {
		t.Errorf("stored count %d, want 4", u.Count)
	}
}

// TestAClockLeftUnsetIsTheServersFault: a clock that reads outside what
// the stores decide at (a zero time.Time from an Options.Now left unset
// in a test, say) is a 500 problem, with the cause logged, never a store
// outage: FailOpen would let every request through uncounted, and the
// metrics would count a store error.
func TestAClockLeftUnsetIsTheServersFault(t *testing.T) {
	f := newFixture(t, service.Options{Now: func() time.Time { return time.Time{} }, FailMode: limiter.FailOpen})
	wantProblem(t, f.do(t, "GET", "/ping", "X-Client-Key", "k"), 500, service.TypeBlank, "/ping")
	wantProblem(t, f.do(t, "GET", "/status?key=k"), 500, service.TypeBlank, "/status")
	if !strings.Contains(f.logs.String(), "1970 to 2160") {
		t.Errorf("the cause is not logged: %s", f.logs)
	}
	// Nor is it logged as one: no fault class (it was "unavailable", the
	// class of a store that may come back by itself), at ERROR.
	for _, line := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		if strings.Contains(line, `"fault"`) || !strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("a wrong clock's line: %s\nwant it at ERROR, with no fault class", line)
		}
	}
}

// TestAFailedNewLeavesNoClaim: a New that fails (an unknown route) leaves
// nothing behind on its store: a New corrected with another policy
// without a namespace is not refused as sharing the first one's counters.
func TestAFailedNewLeavesNoClaim(t *testing.T) {
	store := memory.New()
	rule := func(name string) []limiter.Rule {
		return []limiter.Rule{{Policy: limiter.Policy{Name: name, Limit: 1, Window: time.Minute}, Routes: []string{"/ping"}}}
	}
	if _, err := service.New(service.Options{Store: store, Rules: rule("a"), Routes: []string{"/bogus"}}); err == nil {
		t.Fatal("an unknown route: accepted")
	}
	if _, err := service.New(service.Options{Store: store, Rules: rule("b")}); err != nil {
		t.Errorf("New corrected, with policy b: %v", err)
	}
}
