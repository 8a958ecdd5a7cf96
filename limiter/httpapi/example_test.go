package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/httpapi"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// Guard two routes of your own API: reading an order, 2 a minute per
// address; placing one, at a cost of 5 of 100 an hour per user. Behind
// API Gateway, hand the same handler to lambda.Start(awslambda.HTTP(h)).
func ExampleMiddleware() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(dir, "ratelimit.db")})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	guard, err := httpapi.Middleware(httpapi.Options{
		Store: store,
		Rules: []limiter.Rule{
			{Policy: limiter.Policy{Name: "reads", Limit: 2, Window: time.Minute, Namespace: "reads"},
				KeySource: limiter.KeySource{Kind: limiter.KeyFromSourceIP}, Routes: []string{"GET /orders/{id}"}},
			{Policy: limiter.Policy{Name: "orders", Limit: 100, Window: time.Hour, Namespace: "orders"},
				Routes: []string{"POST /orders"}, Cost: 5},
		},
		Keys: map[string]httpapi.KeyFunc{"orders": func(r *http.Request) (string, error) {
			return r.Header.Get("X-User"), nil // your session or API key lookup
		}},
		Logger: slog.New(slog.DiscardHandler),
		// Now defaults to time.Now; one instant here keeps the output the same.
		Now: func() time.Time { return time.Date(2026, 12, 1, 9, 0, 30, 0, time.UTC) },
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "order ", r.PathValue("id")) })
	h := guard(mux)

	for range 3 {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/orders/42", nil))
		fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("X-RateLimit-Remaining"))
	}
	// Output:
	// 200 "reads";q=2;w=60 1
	// 200 "reads";q=2;w=60 0
	// 429 "reads";q=2;w=60 0
}
