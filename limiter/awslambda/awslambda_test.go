package awslambda_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/awslambda"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// The fixtures' requests happen at 2026-01-01T00:00:18Z (requestContext.time).
var fixtureNow = time.Date(2026, 1, 1, 0, 0, 18, 0, time.UTC)

// pingPolicy is the fixtures' /ping policy, the seed's defaults.
var pingPolicy = limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}

// pingRules are the rules of p alone on /ping, its keys found by ks.
func pingRules(p limiter.Policy, ks limiter.KeySource) []limiter.Rule {
	return []limiter.Rule{{Policy: p, KeySource: ks, Routes: []string{"/ping"}}}
}

// lambdaFixture is a function as its main.go wires it: the API behind
// awslambda.HTTP, which finds the request's context with awslambda.Caller,
// on a real SQLite store.
type lambdaFixture struct {
	store   *sqlite.Store
	handler awslambda.HTTPHandler
	logs    *bytes.Buffer
}

// newLambdaWith builds the function from opts, with what it leaves out
// filled in: a fresh SQLite store, pingPolicy keyed by the header, the
// fixtures' clock, and JSON logs in the fixture's buffer. Every test of a
// handler behind the adapter starts here.
func newLambdaWith(tb testing.TB, opts service.Options) *lambdaFixture {
	tb.Helper()
	if opts.Store == nil {
		opts.Store = sqlitetest.Open(tb, sqlite.Config{})
	}
	if len(opts.Rules) == 0 {
		opts.Rules = pingRules(pingPolicy, limiter.KeySource{Kind: limiter.KeyFromHeader})
	}
	if opts.Now == nil {
		opts.Now = func() time.Time { return fixtureNow }
	}
	logs := &bytes.Buffer{}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	store, _ := opts.Store.(*sqlite.Store)
	return &lambdaFixture{store: store, handler: awslambda.HTTP(lambdatest.NewAPI(tb, opts)), logs: logs}
}

// newLambda is the ping policy behind the adapter, its keys found by ks.
func newLambda(t *testing.T, ks limiter.KeySource) *lambdaFixture {
	t.Helper()
	return newLambdaWith(t, service.Options{Rules: pingRules(pingPolicy, ks)})
}

func (f *lambdaFixture) invoke(t *testing.T, e events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "lambda-req-1"})
	resp, err := f.handler(ctx, e)
	if err != nil {
		t.Fatalf("invocation error: %v", err)
	}
	return resp
}

func TestPingFixtureUntil429(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")
	var last events.APIGatewayV2HTTPResponse
	for i, want := range []int{200, 200, 200, 429} {
		last = f.invoke(t, e)
		if last.StatusCode != want {
			t.Fatalf("invocation %d: %d %s, want %d", i+1, last.StatusCode, last.Body, want)
		}
	}
	for k, v := range map[string]string{
		"Content-Type": "application/problem+json", "Retry-After": "42",
		"RateLimit-Policy": `"ping";q=3;w=60`, "RateLimit": `"ping";r=0;t=42`,
		"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1767225660",
	} {
		if got := lambdatest.Header(last, k); got != v {
			t.Errorf("429 header %s = %q, want %q (headers %v)", k, got, v, last.Headers)
		}
	}
	p := lambdatest.JSONBody(t, last)
	if p["status"] != float64(429) || p["title"] != "Too Many Requests" || p["instance"] != "/ping" ||
		p["detail"] != "Rate limit of 3 requests per 60s exceeded for key 'alice'." {
		t.Errorf("429 body = %v", p)
	}
	// The audit rows carry API Gateway's request id; the logs carry Lambda's.
	db := sqlitetest.Inspect(t, f.store.Path())
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls WHERE key = 'alice' AND request_id = 'Qx1aBc2dIAMEVxQ=' AND route = 'GET /ping'`); n != 3 {
		t.Errorf("%d audit rows with the API Gateway request id, want 3", n)
	}
	if !strings.Contains(f.logs.String(), `"lambda_request_id":"lambda-req-1"`) {
		t.Errorf("logs lack the Lambda request id: %s", f.logs)
	}
}

func TestPingFixtureWithoutKeyUsesFallback(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	resp := f.invoke(t, lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping-no-key.json"))
	if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 200 || b["key"] != "127.0.0.1" {
		t.Errorf("no-key ping: %d %v, want 200 for key 127.0.0.1", resp.StatusCode, b)
	}
}

func TestStatusFixtures(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	ping := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")
	f.invoke(t, ping)
	f.invoke(t, ping)
	resp := f.invoke(t, lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "status.json"))
	if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 200 || b["key"] != "alice" || b["count"] != float64(2) || b["remaining"] != float64(1) {
		t.Errorf("status: %d %v", resp.StatusCode, b)
	}
	resp = f.invoke(t, lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "status-no-key.json"))
	if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 400 || lambdatest.Header(resp, "Content-Type") != "application/problem+json" || b["instance"] != "/status" {
		t.Errorf("status without key: %d %v %v", resp.StatusCode, resp.Headers, b)
	}
}

func TestKeyWithCommaStaysOneKey(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")
	e.Headers["x-client-key"] = "tenant-1, team a"
	if b := lambdatest.JSONBody(t, f.invoke(t, e)); b["key"] != "tenant-1, team a" {
		t.Errorf("key = %q, want the header exactly", b["key"])
	}
}

func TestSourceIPComesFromTheRequestContext(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromSourceIP})
	e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")
	e.Headers["x-forwarded-for"] = "198.51.100.99"
	// A client forging the proxy's context header gains nothing: the
	// context travels on the Go context, not in a header.
	e.Headers["x-golambdaproxy-apigw-context"] = `{"requestId":"forged","http":{"sourceIp":"10.9.9.9"}}`
	if b := lambdatest.JSONBody(t, f.invoke(t, e)); b["key"] != "203.0.113.7" {
		t.Errorf("key = %v, want requestContext.http.sourceIp 203.0.113.7", b["key"])
	}
	e.RequestContext.HTTP.SourceIP = "192.168.0.1/32" // as sam local generate-event writes it
	if b := lambdatest.JSONBody(t, f.invoke(t, e)); b["key"] != "192.168.0.1" {
		t.Errorf("key = %v, want 192.168.0.1", b["key"])
	}
}

func TestClaimKeySource(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromClaim, Claim: "sub"})
	if b := lambdatest.JSONBody(t, f.invoke(t, lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping-jwt.json"))); b["key"] != "user-42" {
		t.Errorf("key = %v, want the sub claim", b["key"])
	}
	resp := f.invoke(t, lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json"))
	if resp.StatusCode != 401 || lambdatest.Header(resp, "Content-Type") != "application/problem+json" {
		t.Errorf("without a JWT: %d %s, want a 401 problem", resp.StatusCode, resp.Body)
	}
}

func TestMalformedEventGetsAProblemAndTheNextOneWorks(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	bad := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")
	bad.IsBase64Encoded, bad.Body = true, "%%% not base64"
	resp := f.invoke(t, bad)
	if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 400 || lambdatest.Header(resp, "Content-Type") != "application/problem+json" || b["status"] != float64(400) {
		t.Errorf("malformed event: %d %v %v", resp.StatusCode, resp.Headers, b)
	}
	if resp := f.invoke(t, lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")); resp.StatusCode != 200 {
		t.Errorf("next invocation: %d, want 200", resp.StatusCode)
	}
}

func TestPruneFixture(t *testing.T) {
	s := sqlitetest.Open(t, sqlite.Config{})
	e := lambdatest.ReadEvent[events.EventBridgeEvent](t, "prune.json")
	at := e.Time // 2026-01-01T00:05:00Z
	for _, ago := range []time.Duration{10 * time.Minute, 3 * time.Minute, time.Minute, 0} {
		if _, err := s.Allow(context.Background(), storetest.One(pingPolicy, "k"+ago.String(), at.Add(-ago), "", "")); err != nil {
			t.Fatal(err)
		}
	}
	logs := &bytes.Buffer{}
	clock := at.Add(time.Hour) // the clock is later than the event: the event's time counts
	h := awslambda.Prune(s, 5*time.Minute, func() time.Time { return clock }, slog.New(slog.NewJSONHandler(logs, nil)))
	res, err := h(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	// Windows 10 and 3 minutes old ended more than a window ago; the one a
	// minute old is the previous window and stays. Audit: only the row 10
	// minutes old predates the 5-minute retention.
	if res.Windows != 2 || res.Audit != 1 || res.Now != "2026-01-01T00:05:00Z" || res.AuditBefore != "2026-01-01T00:00:00Z" {
		t.Errorf("prune result = %+v", res)
	}
	if !strings.Contains(logs.String(), `"windows_deleted":2`) || !strings.Contains(logs.String(), `"audit_deleted":1`) {
		t.Errorf("prune log = %s", logs)
	}
}

func TestPruneNeverUsesATimeLaterThanTheClock(t *testing.T) {
	s := sqlitetest.Open(t, sqlite.Config{})
	clock := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	if _, err := s.Allow(context.Background(), storetest.One(pingPolicy, "live", clock, "", "")); err != nil {
		t.Fatal(err)
	}
	h := awslambda.Prune(s, 0, func() time.Time { return clock }, slog.New(slog.NewJSONHandler(&bytes.Buffer{}, nil)))
	for _, when := range []time.Time{clock.AddDate(10, 0, 0), {}, time.Unix(0, 0)} {
		res, err := h(context.Background(), events.EventBridgeEvent{Time: when})
		if err != nil || res.Windows != 0 || res.Now != "2026-01-01T00:05:00Z" {
			t.Errorf("event time %v: %+v, %v; want the clock used and the live window kept", when, res, err)
		}
	}
}

func TestHeaderSpelledTwoWaysIsJoinedNotPickedAtRandom(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")
	delete(e.Headers, "x-client-key")
	e.Headers["X-Client-Key"], e.Headers["x-client-key"] = "upper", "lower"
	for range 3 { // the limit: each answer is a 200 that names the key
		if b := lambdatest.JSONBody(t, f.invoke(t, e)); b["key"] != "upper,lower" {
			t.Fatalf("key = %v, want upper,lower every time", b["key"])
		}
	}
}

// TestAnswersBeforeLambdasDeadline holds the database lock past the
// invocation's deadline: the handler must answer with the fail mode before
// Lambda would end the invocation, not run into it.
func TestAnswersBeforeLambdasDeadline(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	ping := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")
	f.invoke(t, ping)
	conn, err := sqlitetest.Connect(t, f.store.Path()).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), "ROLLBACK")

	deadline := time.Now().Add(time.Second) // BUSY_TIMEOUT is 3 s, longer
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "late"})
	resp, err := f.handler(ctx, ping)
	if err != nil || resp.StatusCode != 503 || lambdatest.Header(resp, "Content-Type") != "application/problem+json" {
		t.Fatalf("= %d %v %s, want a 503 problem", resp.StatusCode, err, resp.Body)
	}
	if !time.Now().Before(deadline) {
		t.Errorf("answered after Lambda's deadline: the invocation would have timed out instead")
	}
}
