package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/httpapi"
	"github.com/ft251/ratelimit/limiter/memory"
)

// TestLimitGuardsEverythingItWraps: one policy over every route of the
// handler, keyed as its KeyFunc says, each key with its own count; a mux's
// own redirect is its own, uncounted.
func TestLimitGuardsEverythingItWraps(t *testing.T) {
	store := memory.New()
	limit, err := httpapi.Limit(store, limiter.Policy{Name: "api", Limit: 2, Window: time.Minute}, httpapi.ByHeader("X-API-Key"))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("/docs/", func(w http.ResponseWriter, r *http.Request) {})
	h := limit(mux)
	get := func(path, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if key != "" {
			r.Header.Set("X-API-Key", key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for i, want := range []int{200, 200, 429} {
		if w := get([]string{"/a", "/docs/x", "/a"}[i], "alice"); w.Code != want {
			t.Errorf("alice's request %d: %d, want %d", i+1, w.Code, want)
		}
	}
	if w := get("/a", "bob"); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("bob: %d, remaining %q; want 200 with 1 left: keys count apart", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
	if w := get("/docs", "carol"); w.Code != http.StatusTemporaryRedirect || w.Header().Get("RateLimit") != "" {
		t.Errorf("/docs: %d, RateLimit %q; want the mux's redirect, uncounted", w.Code, w.Header().Get("RateLimit"))
	}
	lambdatest.WantProblem(t, get("/a", ""), 400, httpapi.TypeInvalidKey, "/a")
	if u, _ := store.Usage(context.Background(), limiter.Policy{Name: "api", Limit: 2, Window: time.Minute}, "carol", time.Now()); u.Count != 0 {
		t.Errorf("carol's redirect counted %d", u.Count)
	}
}

// TestTwoPoliciesCannotShareAStoresPlainKeys: a policy without a
// Namespace counts under the client key itself; two such policies on one
// store would count in one counter (a client's fifth upload made its first
// search a 429), as would two in one namespace. The second is refused
// where it is configured, by Limit, Middleware or a Limiter alike, naming
// both; the same policy again (a route guarded twice, or a reload at
// another limit: a policy is its name) is not, nor a policy with a
// namespace of its own.
func TestTwoPoliciesCannotShareAStoresPlainKeys(t *testing.T) {
	store := memory.New()
	search := limiter.Policy{Name: "search", Limit: 3, Window: time.Minute}
	upload := limiter.Policy{Name: "upload", Limit: 100, Window: time.Minute}
	if _, err := httpapi.Limit(store, search, httpapi.BySourceIP); err != nil {
		t.Fatal(err)
	}
	want := `policy "upload" counts under the client key alone on a store where policy "search" already does`
	if _, err := httpapi.Limit(store, upload, httpapi.BySourceIP); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a second Limit on the store: %v, want an error saying %q", err, want)
	}
	if _, err := httpapi.Middleware(httpapi.Options{Store: store, Rules: []limiter.Rule{{Policy: upload, Routes: []string{"/up"}}}}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a Middleware beside it: %v, want an error saying %q", err, want)
	}
	l := &limiter.Limiter{Store: store, Policies: []limiter.Policy{upload}}
	if _, err := l.Allow(context.Background(), limiter.Request{Key: "k"}); !errors.Is(err, limiter.ErrInvalidPolicies) || !strings.Contains(err.Error(), want) {
		t.Errorf("a Limiter beside it: %v, want ErrInvalidPolicies saying %q", err, want)
	}
	if _, err := httpapi.Limit(store, search, httpapi.ByHeader("X-API-Key")); err != nil {
		t.Errorf("the same policy again: %v", err)
	}
	// A policy's name is what it is: the same name at another limit (a
	// configuration reloaded, the old middleware dropped) is the same
	// policy, counting on in its counters.
	if _, err := httpapi.Limit(store, limiter.Policy{Name: "search", Limit: 5, Window: time.Hour}, httpapi.BySourceIP); err != nil {
		t.Errorf("search at another limit, as a reload builds it: %v", err)
	}
	upload.Namespace = "upload"
	if _, err := httpapi.Limit(store, upload, httpapi.BySourceIP); err != nil {
		t.Errorf("upload with a namespace of its own: %v", err)
	}
	// A namespace is one policy's too: another policy in upload's would
	// count in its counters (a newcomer's finding: five uploads made the
	// first search of a "search" in namespace "upload" a 429).
	if _, err := httpapi.Limit(store, upload, httpapi.ByHeader("X-API-Key")); err != nil {
		t.Errorf("upload, with its namespace, again: %v", err)
	}
	intruder := limiter.Policy{Name: "search", Limit: 3, Window: time.Minute, Namespace: "upload"}
	want = `policy "search" counts in namespace "upload" on a store where policy "upload" already does`
	if _, err := httpapi.Limit(store, intruder, httpapi.BySourceIP); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("another policy in upload's namespace: %v, want an error saying %q", err, want)
	}
	// Refused whole: a Middleware or Limiter refused for one of its
	// policies claims none of the others (a tester's finding: the first
	// stayed claimed, and a corrected configuration was refused for it).
	fresh := limiter.Policy{Name: "fresh", Limit: 3, Window: time.Minute, Namespace: "fresh"}
	if _, err := httpapi.Middleware(httpapi.Options{Store: store, Rules: []limiter.Rule{{Policy: fresh, Routes: []string{"/f"}}, {Policy: intruder, Routes: []string{"/s"}}}}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a Middleware with it: %v, want an error saying %q", err, want)
	}
	l = &limiter.Limiter{Store: store, Policies: []limiter.Policy{fresh, intruder}}
	if _, err := l.Allow(context.Background(), limiter.Request{Key: "k"}); !errors.Is(err, limiter.ErrInvalidPolicies) || !strings.Contains(err.Error(), want) {
		t.Errorf("a Limiter with it: %v, want ErrInvalidPolicies saying %q", err, want)
	}
	if _, err := httpapi.Limit(store, limiter.Policy{Name: "other", Limit: 3, Window: time.Minute, Namespace: "fresh"}, httpapi.BySourceIP); err != nil {
		t.Errorf("another policy in fresh's namespace, fresh having been refused with intruder: %v", err)
	}
	if _, err := httpapi.Limit(memory.New(), limiter.Policy{Name: "other", Limit: 1, Window: time.Minute}, httpapi.BySourceIP); err != nil {
		t.Errorf("another store: %v", err)
	}
}

// TestLimitRefusesWhatMiddlewareRefuses: no store (nil, or a nil pointer
// of a store's type), an invalid policy, no key function: an error, not a
// handler that would count wrong or answer every request 500.
func TestLimitRefusesWhatMiddlewareRefuses(t *testing.T) {
	ok := limiter.Policy{Name: "api", Limit: 1, Window: time.Minute}
	for name, tc := range map[string]struct {
		store limiter.Store
		p     limiter.Policy
		key   httpapi.KeyFunc
		want  string
	}{
		"no store":    {nil, ok, httpapi.BySourceIP, "no store"},
		"a nil store": {(*memory.Store)(nil), ok, httpapi.BySourceIP, "no store: a nil *memory.Store"},
		"a bad limit": {memory.New(), limiter.Policy{Name: "api", Window: time.Minute}, httpapi.BySourceIP, "limit 0"},
		"no key":      {memory.New(), ok, nil, "the key function is nil: give BySourceIP, ByHeader(name), ByClaim(name) or your own"},
	} {
		_, err := httpapi.Limit(tc.store, tc.p, tc.key)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
		// Limit's caller wrote no Options: its errors name none of their
		// fields (a nil key was `Keys["api"] is nil`).
		if err != nil && strings.Contains(err.Error(), "Keys") {
			t.Errorf("%s: %v names Options.Keys, which a caller of Limit never saw", name, err)
		}
	}
}

// TestKeyHelpers: the source IP the platform saw (never X-Forwarded-For),
// a claim of the authorizer (401 without it), a header (400 without it).
func TestKeyHelpers(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "192.0.2.7:5555"
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	if k, err := httpapi.BySourceIP(r); k != "192.0.2.7" || err != nil {
		t.Errorf("BySourceIP = %q, %v; want the TCP peer", k, err)
	}
	behind := r.WithContext(service.WithCaller(r.Context(), func(*http.Request) service.Caller {
		return service.Caller{SourceIP: "198.51.100.1", Claims: map[string]string{"sub": "user-1"}}
	}))
	if k, _ := httpapi.BySourceIP(behind); k != "198.51.100.1" {
		t.Errorf("BySourceIP behind API Gateway = %q, want the address it saw", k)
	}
	if k, err := httpapi.ByClaim("sub")(behind); k != "user-1" || err != nil {
		t.Errorf("ByClaim(sub) = %q, %v", k, err)
	}
	var p *httpapi.Problem
	if _, err := httpapi.ByClaim("sub")(r); !errors.As(err, &p) || p.Status != 401 {
		t.Errorf("ByClaim without an authorizer: %v, want a 401 problem", err)
	}
	if _, err := httpapi.ByHeader("X-API-Key")(r); !errors.As(err, &p) || p.Status != 400 {
		t.Errorf("ByHeader without the header: %v, want a 400 problem", err)
	}
}

// TestKeyHelpersRefuseNamesNoRequestHas: ByHeader of a name no header can
// have ("", spaces, a newline, a colon) and ByClaim of one no claim has
// panic when called, as a program's own constant that is wrong: they used
// to be taken, and every request was then answered 400 "no  header" or
// 401, blaming its client.
func TestKeyHelpersRefuseNamesNoRequestHas(t *testing.T) {
	for _, name := range []string{"", "X API Key", "bad\n", "X-Key:", "Ключ"} {
		if msg := panicOf(func() { httpapi.ByHeader(name) }); !strings.Contains(msg, "httpapi: ByHeader") {
			t.Errorf("ByHeader(%q): panic %q, want one naming ByHeader", name, msg)
		}
	}
	for _, name := range []string{"", "a b", "sub\n"} {
		if msg := panicOf(func() { httpapi.ByClaim(name) }); !strings.Contains(msg, "httpapi: ByClaim") {
			t.Errorf("ByClaim(%q): panic %q, want one naming ByClaim", name, msg)
		}
	}
	for _, name := range []string{"X-API-Key", "x_key", "Authorization"} {
		if msg := panicOf(func() { httpapi.ByHeader(name) }); msg != "" {
			t.Errorf("ByHeader(%q) panicked: %s", name, msg)
		}
	}
}

// panicOf is what f panicked with, as a string, or "".
func panicOf(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}
