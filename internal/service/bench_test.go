package service_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/httpapi"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// BenchmarkGuard compares, on one store, /ping with a route of your own
// behind the middleware (a pattern with a wildcard, a cost) and POST /check
// with a cost: the same transaction each, so what differs is the HTTP
// work around it. WAL keeps the disk out of the figures, so that this work
// shows; see BENCHMARKS.md.
func BenchmarkGuard(b *testing.B) {
	policy := limiter.Policy{Name: "ping", Limit: 1 << 40, Window: time.Minute}
	orders := limiter.Policy{Name: "orders", Limit: 1 << 40, Window: time.Minute, Namespace: "orders"}
	rules := []limiter.Rule{
		{Policy: policy, Routes: []string{"/ping"}},
		{Policy: orders, Routes: []string{"GET /orders/{id}", "POST /check"}, Cost: 5},
	}
	store := sqlitetest.Open(b, sqlite.Config{JournalMode: "WAL"})
	opts := service.Options{Store: store, Rules: rules, Logger: slog.New(slog.DiscardHandler)}
	api := lambdatest.NewAPI(b, opts)
	mw, err := httpapi.Middleware(httpapi.Options{Store: store, Rules: rules})
	if err != nil {
		b.Fatal(err)
	}
	guarded := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	for _, c := range []struct {
		name    string
		h       http.Handler
		request func() *http.Request
	}{
		{"ping", api, func() *http.Request { return httptest.NewRequest("GET", "/ping", nil) }},
		{"middleware", guarded, func() *http.Request { return httptest.NewRequest("GET", "/orders/42", nil) }},
		{"check", api, func() *http.Request {
			r := httptest.NewRequest("POST", "/check", strings.NewReader(`{"key":"k","cost":5,"policies":["orders"]}`))
			r.Header.Set("Content-Type", "application/json")
			return r
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				w := httptest.NewRecorder()
				c.h.ServeHTTP(w, c.request())
				if w.Code != 200 {
					b.Fatal(w.Code, w.Body)
				}
			}
		})
	}
}
