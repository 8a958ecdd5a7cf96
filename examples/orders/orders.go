package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/httpapi"
)

// policies guard two routes of the shop, each its own way: reading an
// order, 2 a minute per caller's address; placing one, 5 units of 100 an
// hour per signed-in user (20 orders an hour).
var policies = []limiter.Rule{
	{Policy: limiter.Policy{Name: "reads", Limit: 2, Window: time.Minute, Namespace: "reads"},
		KeySource: limiter.KeySource{Kind: limiter.KeyFromSourceIP}, Routes: []string{"GET /orders/{id}"}},
	{Policy: limiter.Policy{Name: "orders", Limit: 100, Window: time.Hour, Namespace: "orders"},
		Routes: []string{"POST /orders"}, Cost: 5},
}

// user is who placed an order: here the X-User header, in your API the
// session or the API key your authorizer checked.
func user(r *http.Request) (string, error) {
	if u := strings.TrimSpace(r.Header.Get("X-User")); u != "" {
		return u, nil
	}
	return "", httpapi.Unauthenticated("Sign in first: the request has no X-User.")
}

// guard wraps the shop's routes in the limiter's middleware: the requests
// the policies' routes match are counted in store and decided; the rest
// (here GET /health) pass untouched.
func guard(store limiter.Store) (http.Handler, error) {
	mw, err := httpapi.Middleware(httpapi.Options{
		Store:    store,
		Rules:    policies,
		Keys:     map[string]httpapi.KeyFunc{"orders": user},
		FailMode: limiter.FailClosed,
	})
	if err != nil {
		return nil, err
	}
	return mw(shop()), nil
}

// shop is the API being guarded.
func shop() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, map[string]any{"order": r.PathValue("id"), "status": "shipped"})
	})
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusCreated, map[string]any{"placed": true})
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusOK, map[string]any{"ok": true})
	})
	return mux
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
