package service_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// guard is a handler behind the engine's middleware, and what it logged:
// for the tests that compare the API's answers and lines with the
// middleware's (limiter/httpapi tests the middleware itself).
type guard struct {
	h    http.Handler
	logs *bytes.Buffer
}

// newGuard puts next behind Middleware(opts), with a fresh store and the
// tests' clock unless opts has them, and fails the test if it refuses.
func newGuard(t *testing.T, opts service.Options, next http.Handler) *guard {
	t.Helper()
	if opts.Store == nil {
		opts.Store = sqlitetest.Open(t, sqlite.Config{BusyTimeout: time.Second})
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return now }
	}
	logs := &bytes.Buffer{}
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	mw, err := service.Middleware(opts)
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

// TestTheAPIsRoutesFollowHostPatterns: a rule for "api.example.com/ping"
// guards /ping asked of that host only, as ServeMux would route it.
func TestTheAPIsRoutesFollowHostPatterns(t *testing.T) {
	f := newFixture(t, service.Options{Rules: []limiter.Rule{{Policy: pingPolicy, Routes: []string{"api.example.com/ping"}}}})
	r := httptest.NewRequest("GET", "/ping", nil)
	r.Host = "api.example.com"
	r.Header.Set("X-Client-Key", "k")
	w := httptest.NewRecorder()
	f.api.ServeHTTP(w, r)
	if w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("/ping on api.example.com: %d %s, want counted", w.Code, w.Body)
	}
	if w := f.do(t, "GET", "/ping", "X-Client-Key", "k"); !strings.Contains(w.Body.String(), `"counted":false`) {
		t.Errorf("/ping on another host: %s, want uncounted", w.Body)
	}
}
