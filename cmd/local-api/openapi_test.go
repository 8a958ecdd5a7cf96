package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// openAPIPath is the HTTP API's OpenAPI document, which other languages'
// clients are built from.
const openAPIPath = "../../docs/openapi.yaml"

// apiHeaders are the response headers the API itself sets: each one a
// response carries must be declared for that response in the document.
// (kin-openapi checks the declared ones, and lets any other through.)
var apiHeaders = []string{
	"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
	"Retry-After", "Allow", "WWW-Authenticate", "Accept-Post", "Cache-Control",
}

// contract checks real responses against the OpenAPI document, and notes
// which of its responses were seen.
type contract struct {
	doc    *openapi3.T
	router routers.Router
	seen   map[string]bool // "GET /ping 200", "any other path 404"
}

func loadContract(t *testing.T) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	if err != nil {
		t.Fatalf("load %s: %v", openAPIPath, err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("%s is OpenAPI %s, want 3.1", openAPIPath, doc.OpenAPI)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("%s is not a valid OpenAPI document: %v", openAPIPath, err)
	}
	// The servers name the local default address; the test's servers
	// listen elsewhere, so routes are matched on the path alone.
	routed := *doc
	routed.Servers = nil
	router, err := gorillamux.NewRouter(&routed)
	if err != nil {
		t.Fatal(err)
	}
	return &contract{doc: &routed, router: router, seen: map[string]bool{}}
}

// unrouted is the document's answer to a request that none of its
// operations takes: the component response the document's description
// names, as the only response of a stand-in operation.
func (c *contract) unrouted(method, component string, status int) (*routers.Route, error) {
	ref := c.doc.Components.Responses[component]
	if ref == nil {
		return nil, fmt.Errorf("the document has no components/responses/%s", component)
	}
	op := &openapi3.Operation{Responses: openapi3.NewResponses(openapi3.WithStatus(status, ref))}
	return &routers.Route{Spec: c.doc, Path: "(unrouted)", Method: method, Operation: op}, nil
}

// methodsOf are the methods the document lists for the path of r.
func (c *contract) methodsOf(r *http.Request) []string {
	var out []string
	for _, m := range []string{"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT", "TRACE"} {
		probe := r.Clone(context.Background())
		probe.Method = m
		if _, _, err := c.router.FindRoute(probe); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// check validates one response to r against the document: its status must
// be one the operation lists, its declared headers and body must match
// their schemas (no undeclared body member: the schemas forbid them), every
// API header it carries must be declared for it, and a response the
// document gives no body must have none.
func (c *contract) check(r *http.Request, status int, header http.Header, body []byte) []error {
	route, params, err := c.router.FindRoute(r)
	seen := ""
	switch {
	case err == nil:
		seen = r.Method + " " + route.Path
	case errors.Is(err, routers.ErrPathNotFound):
		seen = "any other path"
		route, err = c.unrouted(r.Method, "NotFound", http.StatusNotFound)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		seen = "any other method"
		route, err = c.unrouted(r.Method, "MethodNotAllowed", http.StatusMethodNotAllowed)
	}
	if err != nil {
		return []error{err}
	}
	var errs []error
	if seen == "any other method" {
		// Allow lists the path's methods, as documented; ServeMux adds
		// HEAD where it serves GET (the admin override path).
		allow := strings.Split(header.Get("Allow"), ", ")
		if slices.Contains(allow, "GET") {
			allow = slices.DeleteFunc(allow, func(m string) bool { return m == "HEAD" })
		}
		slices.Sort(allow)
		if doc := c.methodsOf(r); !slices.Equal(allow, doc) {
			errs = append(errs, fmt.Errorf("Allow: %q, but the document's methods for the path are %v", header.Get("Allow"), doc))
		}
	}
	opts := &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}
	// The reason (which says where), without the schema and value in full.
	opts.WithCustomSchemaErrorFunc(func(err *openapi3.SchemaError) string { return err.Reason })
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                opts,
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		errs = append(errs, err)
	}
	ref := route.Operation.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return append(errs, fmt.Errorf("status %d is not in the document for %s", status, seen))
	}
	c.seen[fmt.Sprintf("%s %d", seen, status)] = true
	declared := map[string]bool{}
	for name := range ref.Value.Headers {
		declared[http.CanonicalHeaderKey(name)] = true
	}
	for _, name := range apiHeaders {
		if len(header.Values(name)) > 0 && !declared[http.CanonicalHeaderKey(name)] {
			errs = append(errs, fmt.Errorf("header %s: %q is sent, but not declared in the document for %s %d", name, header.Get(name), seen, status))
		}
	}
	if len(ref.Value.Content) == 0 && len(body) > 0 {
		errs = append(errs, fmt.Errorf("a body is sent, but the document gives %s %d none: %s", seen, status, body))
	}
	return errs
}

// unseen are the document's responses no checked response was, but for
// those listed in exempt (status codes that cannot be produced here).
func (c *contract) unseen(exempt ...int) []string {
	var out []string
	want := []string{"any other path 404", "any other method 405"}
	for path, item := range c.doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code := range op.Responses.Map() {
				want = append(want, method+" "+path+" "+code)
			}
		}
	}
	for _, w := range want {
		code := w[strings.LastIndex(w, " ")+1:]
		if !c.seen[w] && !slices.ContainsFunc(exempt, func(s int) bool { return fmt.Sprint(s) == code }) {
			out = append(out, w)
		}
	}
	sort.Strings(out)
	return out
}

// apiCall is one request to a server, and the status it must get.
type apiCall struct {
	method, target string // target: the escaped path and query
	body           string
	header         map[string]string // "Host" sets the request's host
	want           int
}

// send makes the call to the server at addr and checks the answer against
// the document.
func (c *contract) send(t *testing.T, addr string, call apiCall) {
	t.Helper()
	var rd io.Reader
	if call.body != "" {
		rd = strings.NewReader(call.body)
	}
	req, err := http.NewRequest(call.method, "http://"+addr+call.target, rd)
	if err != nil {
		t.Fatal(err)
	}
	if call.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range call.header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", call.method, call.target, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: %v", call.method, call.target, err)
	}
	what := call.method + " " + call.target
	if call.body != "" {
		what += " " + call.body[:min(len(call.body), 80)]
	}
	if resp.StatusCode != call.want {
		t.Errorf("%s: %d %s, want %d", what, resp.StatusCode, body, call.want)
	}
	for _, err := range c.check(req, resp.StatusCode, resp.Header, body) {
		t.Errorf("%s: %d %s\n%v", what, resp.StatusCode, body, err)
	}
}

// startDraining starts a local server and discards its output lines, so
// that its log never fills the pipe.
func startDraining(t *testing.T, dir string, env ...string) string {
	t.Helper()
	addr, lines, cmd := startLocalServer(t, dir, env...)
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	go func() {
		for range lines {
		}
	}()
	return addr
}

// contractPolicies are the servers' policies: two enforced ones on /ping
// of host 127.0.0.1, so that the third request there is a 429, and several
// bodies list several policies; a GCRA one on POST /check, for "burst";
// a shadow on both, for "shadow"; one with tiers on both, picked by the
// X-Plan header, for "tier"; and one on /ping of host signed.test keyed
// on a claim, which the local server never has: a 401. A /ping of any
// other host is counted by none.
const contractPolicies = `POLICIES=[` +
	`{"name":"ping","limit":3,"window":"30d","routes":["GET 127.0.0.1/ping"]},` +
	`{"name":"burst","limit":2,"window":"30d","algorithm":"sliding","routes":["GET 127.0.0.1/ping"]},` +
	`{"name":"tokens","limit":10,"window":"1m","algorithm":"gcra","burst":3,"routes":["POST /check"]},` +
	`{"name":"audit","limit":1,"window":"30d","shadow":true,"routes":["GET 127.0.0.1/ping","POST /check"]},` +
	`{"name":"plans","limit":3,"window":"30d","tiers":{"pro":{"limit":5}},"tier":{"source":"header","header":"X-Plan"},"routes":["GET 127.0.0.1/ping","POST /check"]},` +
	`{"name":"signed","limit":5,"window":"30d","key":"claim:sub","routes":["GET signed.test/ping"]}]`

// TestResponsesMatchTheOpenAPIDocument runs the local server with the
// admin routes, sends it requests that get every status the document
// lists for every operation (but 500, which only a bug answers), and
// checks each answer against docs/openapi.yaml; then two servers whose
// store has gone (its directory removed), failing closed and open, for the
// 503s and the degraded bodies.
func TestResponsesMatchTheOpenAPIDocument(t *testing.T) {
	t.Parallel()
	c := loadContract(t)
	addr := startDraining(t, t.TempDir(), contractPolicies, "ADMIN=on")

	long := strings.Repeat("k", 257)
	host := func(h string) map[string]string { return map[string]string{"Host": h} }
	key := func(k string) map[string]string { return map[string]string{"X-Client-Key": k} }
	plain := map[string]string{"Content-Type": "text/plain"}
	tooBig := `{"key":"` + strings.Repeat("a", 70<<10) + `"}`
	for _, call := range []apiCall{
		// /ping: alice's third request is over burst's 2.
		{method: "GET", target: "/ping", header: key("alice"), want: 200},
		{method: "GET", target: "/ping", header: key("alice"), want: 200},
		{method: "GET", target: "/ping", header: key("alice"), want: 429},
		{method: "GET", target: "/ping", header: map[string]string{"X-Client-Key": "paid", "X-Plan": "pro"}, want: 200},
		{method: "GET", target: "/ping", header: host("uncounted.test"), want: 200},
		{method: "GET", target: "/ping", header: host("signed.test"), want: 401},
		{method: "GET", target: "/ping", header: key(long), want: 400},
		{method: "POST", target: "/ping", want: 405},
		{method: "GET", target: "/nope", want: 404},

		// /status
		{method: "GET", target: "/status?key=alice", want: 200},
		{method: "GET", target: "/status?key=alice&policy=ping", want: 200},
		{method: "GET", target: "/status?key=alice&policy=tokens", want: 200},
		{method: "GET", target: "/status?key=alice&tier=pro", want: 200},
		{method: "GET", target: "/status?key=alice&policy=plans&tier=pro", want: 200},
		{method: "GET", target: "/status?key=a&tier=pro&tier=x", want: 400},
		{method: "GET", target: "/status", want: 400},
		{method: "GET", target: "/status?key=", want: 400},
		{method: "GET", target: "/status?key=a&key=b", want: 400},
		{method: "GET", target: "/status?key=%zz", want: 400},
		{method: "GET", target: "/status?key=a&policy=nope", want: 400},
		{method: "GET", target: "/status?key=" + long, want: 400},
		{method: "DELETE", target: "/status?key=a", want: 405},

		// /check: tokens and audit by default; dave's second check of
		// cost 3 under ping is denied.
		{method: "POST", target: "/check", body: `{"key":"carol"}`, want: 200},
		{method: "POST", target: "/check", body: `{"key":"dave","cost":3,"policies":["ping"]}`, want: 200},
		{method: "POST", target: "/check", body: `{"key":"dave","cost":3,"policies":["ping"]}`, want: 200},
		{method: "POST", target: "/check", body: `{"key":"erin","cost":1e0,"policies":["ping","burst","tokens","audit","signed"]}`, want: 200},
		{method: "POST", target: "/check", body: `{"key":"frank","cost":5,"policies":["plans"],"tier":"pro"}`, want: 200},
		{method: "POST", target: "/check", body: `{"key":"a","tier":null}`, want: 400},
		{method: "POST", target: "/check", body: `{"key":"a","tier":1}`, want: 400},
		{method: "POST", target: "/check", body: `{}`, want: 400},
		{method: "POST", target: "/check", body: `{"key":"a","cost":0}`, want: 400},
		{method: "POST", target: "/check", body: `{"key":"a","cost":4}`, want: 400}, // over tokens' burst
		{method: "POST", target: "/check", body: `{"key":"a","policies":[]}`, want: 400},
		{method: "POST", target: "/check", body: `{"key":"a","policies":["nope"]}`, want: 400},
		{method: "POST", target: "/check", body: `{"key":"a","policies":["ping","ping"]}`, want: 400},
		{method: "POST", target: "/check", body: `{"key":"a","extra":1}`, want: 400},
		{method: "POST", target: "/check", body: `{"key":"a"} {}`, want: 400},
		{method: "POST", target: "/check", body: `{"key":"` + long + `"}`, want: 400},
		{method: "POST", target: "/check", body: tooBig, want: 413},
		{method: "POST", target: "/check", body: `{"key":"a"}`, header: plain, want: 415},
		{method: "GET", target: "/check", want: 405},

		// The admin routes.
		{method: "PUT", target: "/admin/overrides/tokens/alice", body: `{"limit":20,"burst":5}`, want: 200},
		{method: "PUT", target: "/admin/overrides/ping/team%2Fa", body: `{"limit":1e1}`, want: 200},
		{method: "GET", target: "/admin/overrides/tokens/alice", want: 200},
		{method: "GET", target: "/admin/overrides/ping/team%2Fa", want: 200},
		{method: "GET", target: "/admin/overrides/ping/nobody", want: 404},
		{method: "GET", target: "/admin/overrides/nope/alice", want: 404},
		{method: "GET", target: "/admin/overrides/ping/%20alice", want: 400},
		{method: "PUT", target: "/admin/overrides/nope/alice", body: `{"limit":5}`, want: 404},
		{method: "PUT", target: "/admin/overrides/ping/%20alice", body: `{"limit":5}`, want: 400},
		{method: "PUT", target: "/admin/overrides/ping/alice", body: `{"limit":0}`, want: 400},
		{method: "PUT", target: "/admin/overrides/ping/alice", body: `{"limit":5,"burst":2}`, want: 400},
		{method: "PUT", target: "/admin/overrides/ping/alice", body: `{"limit":5}`, header: plain, want: 415},
		{method: "PUT", target: "/admin/overrides/ping/alice", body: tooBig, want: 413},
		{method: "POST", target: "/admin/overrides/ping/alice", want: 405},
		{method: "DELETE", target: "/admin/overrides/ping/team%2Fa", want: 204},
		{method: "DELETE", target: "/admin/overrides/ping/nobody", want: 204},
		{method: "DELETE", target: "/admin/overrides/nope/alice", want: 404},
		{method: "DELETE", target: "/admin/overrides/ping/%20alice", want: 400},
		{method: "DELETE", target: "/admin/counters/burst/alice", want: 204},
		{method: "DELETE", target: "/admin/counters/nope/alice", want: 404},
		{method: "DELETE", target: "/admin/counters/ping/%20alice", want: 400},
		{method: "PUT", target: "/admin/counters/ping/alice", want: 405},
		{method: "GET", target: "/admin/overrides/ping//alice", want: 404},
		{method: "GET", target: "/admin/overrides/ping/a/b", want: 404},
		{method: "GET", target: "/admin/nope", want: 404},
	} {
		c.send(t, addr, call)
	}

	// The store's directory removed under a running server: every route
	// that reaches the store is a 503 when failing closed; failing open,
	// /ping and /check let the request through, degraded.
	for _, mode := range []string{"closed", "open"} {
		dir := t.TempDir()
		addr := startDraining(t, dir, contractPolicies, "ADMIN=on", "FAIL_MODE="+mode)
		if err := os.RemoveAll(filepath.Join(dir, "data")); err != nil {
			t.Fatal(err)
		}
		waitForStoreFailure(t, addr)
		decided := map[string]int{"closed": 503, "open": 200}[mode]
		for _, call := range []apiCall{
			{method: "GET", target: "/ping", header: key("alice"), want: decided},
			{method: "POST", target: "/check", body: `{"key":"carol"}`, want: decided},
			{method: "GET", target: "/status?key=alice", want: 503},
			{method: "PUT", target: "/admin/overrides/tokens/alice", body: `{"limit":20}`, want: 503},
			{method: "GET", target: "/admin/overrides/tokens/alice", want: 503},
			{method: "DELETE", target: "/admin/overrides/tokens/alice", want: 503},
			{method: "DELETE", target: "/admin/counters/tokens/alice", want: 503},
		} {
			c.send(t, addr, call)
		}
	}

	if missing := c.unseen(http.StatusInternalServerError); len(missing) > 0 {
		t.Errorf("responses in the document that no request got (add a request that gets it, or take it out of the document):\n%s", strings.Join(missing, "\n"))
	}
}

// waitForStoreFailure waits until the server at addr finds its store gone:
// it checks that its file is still there at most once a second.
func waitForStoreFailure(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/status?key=probe")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/status still answers %d with the store's directory removed", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOpenAPICheckCatchesDrift feeds the document's check answers that
// differ from it in one way each: every one must be caught.
func TestOpenAPICheckCatchesDrift(t *testing.T) {
	t.Parallel()
	c := loadContract(t)
	good := `{"key":"a","count":1,"limit":3,"remaining":2,"window_start":"2026-11-03T00:00:00Z","reset_seconds":60}`
	json := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}}
	with := func(h http.Header, k, v string) http.Header {
		h = h.Clone()
		h.Set(k, v)
		return h
	}
	status := httptest.NewRequest("GET", "/status?key=a", nil)
	for _, tc := range []struct {
		name   string
		req    *http.Request
		status int
		header http.Header
		body   string
		ok     bool
	}{
		{"as documented", status, 200, json, good, true},
		{"an undocumented member", status, 200, json, strings.TrimSuffix(good, "}") + `,"extra":1}`, false},
		{"a member missing", status, 200, json, strings.Replace(good, `"count":1,`, "", 1), false},
		{"a member of another type", status, 200, json, strings.Replace(good, `"count":1`, `"count":"1"`, 1), false},
		{"an undeclared header", status, 200, with(json, "RateLimit", `"ping";r=2;t=60`), good, false},
		{"a declared header's value", status, 200, with(json, "Cache-Control", "max-age=60"), good, false},
		{"a required header missing", status, 200, http.Header{"Content-Type": {"application/json"}}, good, false},
		{"an undocumented status", status, 418, json, good, false},
		{"another media type", status, 200, with(json, "Content-Type", "text/plain"), good, false},
		{"a body where none is documented", httptest.NewRequest("DELETE", "/admin/counters/ping/a", nil), 204, json, good, false},
		{"a 405 whose Allow is not the document's", httptest.NewRequest("POST", "/status", nil), 405,
			with(with(json, "Content-Type", "application/problem+json"), "Allow", "GET, POST"),
			`{"type":"about:blank","title":"Method Not Allowed","status":405,"detail":"d","instance":"/status"}`, false},
	} {
		errs := c.check(tc.req, tc.status, tc.header, []byte(tc.body))
		if tc.ok && len(errs) > 0 {
			t.Errorf("%s: %v", tc.name, errs)
		}
		if !tc.ok && len(errs) == 0 {
			t.Errorf("%s: not caught", tc.name)
		}
		if !tc.ok {
			t.Logf("%s: caught: %v", tc.name, errs)
		}
	}
}
