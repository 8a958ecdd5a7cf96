package awslambda_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/awslambda"
	"github.com/ft251/ratelimit/limiter/httpapi"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// shop is a user's own API: orders to read and place, uploads, and a health
// check nobody limits. Each handler says what the limiter decided for it.
func shop() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		o, _ := httpapi.OutcomeFrom(r.Context())
		fmt.Fprintf(w, `{"order":%q,"left":%d}`, r.PathValue("id"), o.Decisions[0].Remaining)
	})
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		// Set before WriteHeader: httptest's recorder sniffs no type
		// after it, where the API proxy's writer does.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"placed":true}`)
	})
	mux.HandleFunc("POST /upload", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, `{"stored":%d}`, n)
	})
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	return mux
}

// shopOptions guard two of the shop's routes with policies of their own,
// keyed and costed three ways: by source address, by a function of the
// request, and by what the request carries.
func shopOptions(store limiter.Store) httpapi.Options {
	return httpapi.Options{
		Store: store,
		Rules: []limiter.Rule{
			{Policy: limiter.Policy{Name: "reads", Limit: 2, Window: time.Minute, Namespace: "reads"},
				KeySource: limiter.KeySource{Kind: limiter.KeyFromSourceIP}, Routes: []string{"GET /orders/{id}"}},
			{Policy: limiter.Policy{Name: "orders", Limit: 100, Window: time.Hour, Namespace: "orders"},
				Routes: []string{"POST /orders"}, Cost: 5},
			{Policy: limiter.Policy{Name: "uploads", Limit: 10, Window: time.Minute, Namespace: "uploads"},
				KeySource: limiter.KeySource{Kind: limiter.KeyFromSourceIP}, Routes: []string{"POST /upload"}},
		},
		Keys: map[string]httpapi.KeyFunc{"orders": func(r *http.Request) (string, error) {
			if u := r.Header.Get("X-User"); u != "" {
				return u, nil
			}
			return "", errors.New("no X-User")
		}},
		// An upload costs a unit per KiB, rounded up.
		Costs: map[string]httpapi.CostFunc{"uploads": func(r *http.Request) (int64, error) { return (r.ContentLength + 1023) / 1024, nil }},
		Now:   func() time.Time { return fixtureNow },
	}
}

// seen is what a client sees of a response.
type seen struct {
	status  int
	headers map[string]string
	body    string
}

func (a seen) String() string { return fmt.Sprintf("%d %v %s", a.status, a.headers, a.body) }

var seenHeaders = []string{"Content-Type", "Retry-After", "RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Allow"}

// host runs the shop behind the middleware, one way or another.
type host func(t *testing.T, method, path, body string, header ...string) seen

// inServer is the shop in a net/http server, as httptest drives it.
func inServer(t *testing.T) host {
	mw, err := httpapi.Middleware(withLogs(shopOptions(sqlitetest.Open(t, sqlite.Config{}))))
	if err != nil {
		t.Fatal(err)
	}
	h := mw(shop())
	return func(t *testing.T, method, path, body string, header ...string) seen {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.RemoteAddr = "203.0.113.7:40000"
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		a := seen{status: w.Code, headers: map[string]string{}, body: strings.TrimSpace(w.Body.String())}
		for _, k := range seenHeaders {
			if v := w.Header().Get(k); v != "" {
				a.headers[k] = v
			}
		}
		return a
	}
}

// inLambda is the shop in the user's own Lambda function, behind API
// Gateway: lambda.Start(awslambda.HTTP(mw(shop()))).
func inLambda(t *testing.T) host {
	// No Options.Caller: awslambda.HTTP tells the middleware what API
	// Gateway knows (httpapi.WithCaller), the source address included.
	opts := withLogs(shopOptions(sqlitetest.Open(t, sqlite.Config{})))
	mw, err := httpapi.Middleware(opts)
	if err != nil {
		t.Fatal(err)
	}
	handler := awslambda.HTTP(mw(shop()))
	return func(t *testing.T, method, path, body string, header ...string) seen {
		e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")
		e.RawPath, e.RouteKey, e.RequestContext.RouteKey = path, "$default", "$default"
		e.RequestContext.HTTP.Method, e.RequestContext.HTTP.Path = method, path
		e.Headers = map[string]string{"host": "abc123xyz9.execute-api.us-east-1.amazonaws.com"}
		for i := 0; i+1 < len(header); i += 2 {
			e.Headers[strings.ToLower(header[i])] = header[i+1]
		}
		if body != "" {
			e.Body, e.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(body)), true
			e.Headers["content-length"] = fmt.Sprint(len(body))
		}
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "mw"})
		resp, err := handler(ctx, e)
		if err != nil {
			t.Fatalf("invocation error: %v", err)
		}
		a := seen{status: resp.StatusCode, headers: map[string]string{}, body: strings.TrimSpace(resp.Body)}
		for _, k := range seenHeaders {
			if v := lambdatest.Header(resp, k); v != "" {
				a.headers[k] = v
			}
		}
		return a
	}
}

func withLogs(o httpapi.Options) httpapi.Options {
	o.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	return o
}

// TestMiddlewareGuardsAnyRouteAlikeInBothHosts runs one script against the
// shop in a net/http server and in a Lambda function behind API Gateway,
// checks every seen, and checks that both hosts answered alike.
func TestMiddlewareGuardsAnyRouteAlikeInBothHosts(t *testing.T) {
	hosts := map[string]host{"server": inServer(t), "lambda": inLambda(t)}
	transcripts := map[string][]string{}
	for name, do := range hosts {
		t.Run(name, func(t *testing.T) {
			var tr []string
			step := func(want int, method, path, body string, header ...string) seen {
				t.Helper()
				a := do(t, method, path, body, header...)
				if a.status != want {
					t.Fatalf("%s %s: %s, want %d", method, path, a, want)
				}
				tr = append(tr, method+" "+path+" -> "+a.String())
				return a
			}
			// Reads: 2 a minute by address; the third is a 429 /ping's way.
			a := step(200, "GET", "/orders/7", "")
			if a.body != `{"order":"7","left":1}` || a.headers["RateLimit-Policy"] != `"reads";q=2;w=60` || a.headers["RateLimit"] != `"reads";r=1;t=42` {
				t.Errorf("first read: %s", a)
			}
			step(200, "GET", "/orders/8", "")
			a = step(429, "GET", "/orders/9", "")
			if a.headers["Retry-After"] != "42" || a.headers["Content-Type"] != "application/problem+json" ||
				!strings.Contains(a.body, `"type":"urn:ratelimit:problem:rate-limit-exceeded"`) || !strings.Contains(a.body, `"instance":"/orders/9"`) {
				t.Errorf("third read: %s, want the 429 problem with Retry-After 42", a)
			}
			if strings.Contains(a.body, `"order"`) {
				t.Errorf("a rejected request reached the handler: %s", a)
			}
			// What no policy guards passes untouched.
			if a := step(200, "GET", "/health", ""); a.body != "ok" || a.headers["RateLimit"] != "" {
				t.Errorf("health: %s, want ok without rate limit headers", a)
			}
			// Orders: cost 5 of 100 an hour, keyed by a function.
			for i := range 20 {
				if a := step(201, "POST", "/orders", "{}", "X-User", "u1"); a.headers["X-RateLimit-Remaining"] != fmt.Sprint(95-5*i) {
					t.Errorf("order %d: remaining %q, want %d", i+1, a.headers["X-RateLimit-Remaining"], 95-5*i)
				}
			}
			if a := step(429, "POST", "/orders", "{}", "X-User", "u1"); a.headers["Retry-After"] != "3582" {
				t.Errorf("order 21: Retry-After %q, want 3582 (the hour's end)", a.headers["Retry-After"])
			}
			step(201, "POST", "/orders", "{}", "X-User", "u2")
			step(400, "POST", "/orders", "{}") // the key function refuses it
			// Uploads: a unit per KiB, 10 a minute.
			if a := step(200, "POST", "/upload", strings.Repeat("x", 3000)); a.headers["RateLimit"] != `"uploads";r=7;t=42` {
				t.Errorf("3 KiB upload: %s, want 7 units left", a)
			}
			step(429, "POST", "/upload", strings.Repeat("x", 8*1024))
			// The denied 8 units count too (every attempt counts, as
			// much as it costs): 11 of 10, so even 1 more is denied.
			if a := step(429, "POST", "/upload", strings.Repeat("x", 100)); a.headers["RateLimit"] != `"uploads";r=0;t=42` {
				t.Errorf("a small upload after the denial: %s", a)
			}
			transcripts[name] = tr
		})
	}
	if s, l := transcripts["server"], transcripts["lambda"]; strings.Join(s, "\n") != strings.Join(l, "\n") {
		t.Errorf("the hosts answered differently:\nserver:\n%s\nlambda:\n%s", strings.Join(s, "\n"), strings.Join(l, "\n"))
	}
}

// TestMiddlewareRefusesBadOptions: what New would panic for, Middleware
// returns as an error.
func TestMiddlewareRefusesBadOptions(t *testing.T) {
	store := sqlitetest.Open(t, sqlite.Config{})
	p := limiter.Policy{Name: "p", Limit: 1, Window: time.Minute, Namespace: "p"}
	for name, o := range map[string]httpapi.Options{
		"a pattern that does not parse": {Store: store, Rules: []limiter.Rule{{Policy: p, Routes: []string{"GET /a/{b"}}}},
		"a key function for no policy":  {Store: store, Rules: []limiter.Rule{{Policy: p, Routes: []string{"/"}}}, Keys: map[string]httpapi.KeyFunc{"q": nil}},
		"an invalid policy":             {Store: store, Rules: []limiter.Rule{{Policy: limiter.Policy{Name: "x"}, Routes: []string{"/"}}}},
		"no store":                      {Rules: []limiter.Rule{{Policy: p, Routes: []string{"/"}}}},
		"a nil *sqlite.Store":           {Store: (*sqlite.Store)(nil), Rules: []limiter.Rule{{Policy: p, Routes: []string{"/"}}}},
	} {
		if _, err := httpapi.Middleware(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestMiddlewareFailModes: with the store down, closed answers 503 and the
// handler is not reached; open lets the request through, uncounted.
func TestMiddlewareFailModes(t *testing.T) {
	for mode, want := range map[limiter.FailMode]int{limiter.FailClosed: 503, limiter.FailOpen: 200} {
		opts := withLogs(shopOptions(sqlitetest.Broken(t)))
		opts.FailMode = mode
		mw, err := httpapi.Middleware(opts)
		if err != nil {
			t.Fatal(err)
		}
		reached := false
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/orders/1", nil))
		if w.Code != want || reached != (mode == limiter.FailOpen) || w.Header().Get("RateLimit") != "" {
			t.Errorf("%s: %d, reached %v, headers %v; want %d, reached only when open, no rate limit headers", mode, w.Code, reached, w.Header(), want)
		}
		if mode == limiter.FailClosed {
			var p map[string]any
			json.NewDecoder(bytes.NewReader(w.Body.Bytes())).Decode(&p)
			if p["type"] != httpapi.TypeStoreUnavailable || w.Header().Get("Retry-After") == "" {
				t.Errorf("closed: %v, want the store-unavailable problem with Retry-After", p)
			}
		}
	}
}

// TestMiddlewareBehindTheAdapterKnowsTheCaller: with no Options.Caller, a
// middleware behind awslambda.HTTP still keys on what only API Gateway
// knows, a JWT claim: the adapter tells it (httpapi.WithCaller).
func TestMiddlewareBehindTheAdapterKnowsTheCaller(t *testing.T) {
	mw, err := httpapi.Middleware(withLogs(httpapi.Options{
		Store: sqlitetest.Open(t, sqlite.Config{}),
		Rules: []limiter.Rule{{Policy: limiter.Policy{Name: "p", Limit: 1, Window: time.Minute, Namespace: "p"},
			KeySource: limiter.KeySource{Kind: limiter.KeyFromClaim, Claim: "sub"}, Routes: []string{"/"}}},
		Now: func() time.Time { return fixtureNow },
	}))
	if err != nil {
		t.Fatal(err)
	}
	handler := awslambda.HTTP(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })))
	e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping-jwt.json")
	for i, want := range []int{200, 429} {
		resp, err := handler(context.Background(), e)
		if err != nil || resp.StatusCode != want {
			t.Fatalf("request %d: %d %s %v, want %d keyed by the claim", i+1, resp.StatusCode, resp.Body, err, want)
		}
	}
}
