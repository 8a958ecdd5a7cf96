package awslambda_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/httpapi"
)

// pingEvent is the ping fixture with its own copy of the headers, changed by
// set (name, value pairs).
func pingEvent(t *testing.T, set ...string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "ping.json")
	e.Headers = maps.Clone(e.Headers)
	for i := 0; i+1 < len(set); i += 2 {
		e.Headers[set[i]] = set[i+1]
	}
	return e
}

// statusEvent is the status fixture asking for key, URL-encoded in the raw
// query string as API Gateway passes it on.
func statusEvent(t *testing.T, key string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	e := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](t, "status.json")
	e.RawQueryString = "key=" + url.QueryEscape(key)
	e.QueryStringParameters = map[string]string{"key": key}
	return e
}

// TestHostileKeysThroughTheAdapter sends keys that the proxy could split,
// that are at the byte limit, that are not ASCII, or that look like SQL, as
// the raw X-Client-Key of an API Gateway event. Each is counted under exactly
// its bytes and reads back through /status.
func TestHostileKeysThroughTheAdapter(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	db := sqlitetest.Inspect(t, f.store.Path())
	keys := []struct{ name, key string }{
		{"comma", "a,b"}, {"comma and space", "a, b"}, {"spaces around commas", "a , b"},
		{"empty element", "a,,b"}, {"only a comma", ","}, {"four elements", "a,b,c,d"}, // the proxy splits all of these
		{"256 ASCII bytes", strings.Repeat("k", 256)}, {"64 four-byte runes", strings.Repeat("🔑", 64)},
		{"85 three-byte runes and one byte", strings.Repeat("鍵", 85) + "k"},
		{"emoji", "🔑🦀"}, {"emoji joined by ZWJ", "👨\u200d👩\u200d👧"}, {"CJK", "鍵の持ち主"}, {"Arabic", "مفتاح"},
		{"combining accent (NFD)", "e\u0301"}, {"precomposed (NFC)", "\u00e9"},
		{"SQL drop", "'; DROP TABLE rate_limit_windows; --"}, {"SQL or", "' OR '1'='1"},
	}
	for _, tc := range keys {
		key := tc.key
		t.Run(tc.name, func(t *testing.T) {
			resp := f.invoke(t, pingEvent(t, "x-client-key", key))
			if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 200 || b["key"] != key || b["count"] != float64(1) {
				t.Fatalf("ping: %d %v, want 200 for key %q with count 1", resp.StatusCode, b, key)
			}
			if rows, n := sqlitetest.Counter(t, db, key, decide.WindowStart(fixtureNow, pingPolicy.Window)); rows != 1 || n != 1 {
				t.Errorf("%d counter rows hold the key's bytes, with count %d; want 1, with count 1", rows, n)
			}
			resp = f.invoke(t, statusEvent(t, key))
			if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 200 || b["key"] != key || b["count"] != float64(1) {
				t.Errorf("status: %d %v, want key %q with count 1", resp.StatusCode, b, key)
			}
			// Only queryStringParameters, as a hand-made event may have them.
			e := statusEvent(t, key)
			e.RawQueryString = ""
			if b := lambdatest.JSONBody(t, f.invoke(t, e)); b["key"] != key || b["count"] != float64(1) {
				t.Errorf("status from queryStringParameters: %v, want key %q with count 1", b, key)
			}
		})
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM rate_limit_windows`); n != int64(len(keys)) {
		t.Errorf("%d counter rows, want one per key: %d", n, len(keys))
	}
	// Too long, cut mid-rune, control characters, a bidi override that
	// would display "gnp.exe" as "exe.png".
	for _, key := range []string{strings.Repeat("k", 257), (strings.Repeat("k", 254) + "🔑")[:256], "a\x00b", "a\r\nb", "\u202egnp.exe"} {
		resp := f.invoke(t, pingEvent(t, "x-client-key", key))
		if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 400 || b["type"] != httpapi.TypeInvalidKey {
			t.Errorf("key %q: %d %v, want a 400 invalid-client-key problem", key, resp.StatusCode, b)
		}
	}
}

// TestCommaKeyIsOneKeyLocallyAndBehindAPIGateway runs the local handler and
// the Lambda adapter on one store: duplicate headers sent locally, a key
// with a comma locally, and the same key behind API Gateway (which joins
// duplicates with commas) all count against one key.
func TestCommaKeyIsOneKeyLocallyAndBehindAPIGateway(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	local := lambdatest.NewAPI(t, service.Options{
		Store: f.store, Rules: pingRules(pingPolicy, limiter.KeySource{Kind: limiter.KeyFromHeader}),
		Now: func() time.Time { return fixtureNow }, Logger: slog.New(slog.DiscardHandler),
	})
	r := httptest.NewRequest("GET", "/ping", nil)
	r.Header.Add("X-Client-Key", "a")
	r.Header.Add("X-Client-Key", "b")
	w := httptest.NewRecorder()
	local.ServeHTTP(w, r)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"key":"a,b","count":1`) {
		t.Fatalf("local duplicates: %d %s", w.Code, w.Body)
	}
	r = httptest.NewRequest("GET", "/ping", nil)
	r.Header.Set("X-Client-Key", "a,b")
	w = httptest.NewRecorder()
	local.ServeHTTP(w, r)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"key":"a,b","count":2`) {
		t.Fatalf("local a,b: %d %s", w.Code, w.Body)
	}
	resp := f.invoke(t, pingEvent(t, "x-client-key", "a,b"))
	if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 200 || b["key"] != "a,b" || b["count"] != float64(3) {
		t.Errorf("behind API Gateway: %d %v, want key a,b with count 3", resp.StatusCode, b)
	}
}

// TestOversizedEventsAreAnswered sends events with 1 MB parts. A 1 MB key is
// a 400 that neither echoes nor logs the key; 1 MB anywhere else is
// handled as usual.
func TestOversizedEventsAreAnswered(t *testing.T) {
	const mb = 1 << 20
	big := strings.Repeat("v", mb)
	for _, tc := range []struct {
		name   string
		change func(e *events.APIGatewayV2HTTPRequest)
		status int
	}{
		{"X-Client-Key", func(e *events.APIGatewayV2HTTPRequest) { e.Headers["x-client-key"] = big }, 400},
		{"X-Client-Key made of commas", func(e *events.APIGatewayV2HTTPRequest) { e.Headers["x-client-key"] = strings.Repeat(",", mb) }, 400},
		{"another header", func(e *events.APIGatewayV2HTTPRequest) { e.Headers["x-junk"] = big }, 200},
		{"X-Forwarded-For the proxy splits 100,000 ways", func(e *events.APIGatewayV2HTTPRequest) {
			e.Headers["x-forwarded-for"] = strings.Repeat("1.2.3.4, ", mb/10)
		}, 200},
		{"User-Agent, a single-value header", func(e *events.APIGatewayV2HTTPRequest) { e.Headers["user-agent"] = big }, 200},
		{"a cookie", func(e *events.APIGatewayV2HTTPRequest) { e.Cookies = []string{"c=" + big} }, 200},
		{"the proxy context header", func(e *events.APIGatewayV2HTTPRequest) { e.Headers["x-golambdaproxy-apigw-context"] = big }, 200},
		{"a base64 body", func(e *events.APIGatewayV2HTTPRequest) {
			e.IsBase64Encoded, e.Body = true, base64.StdEncoding.EncodeToString([]byte(big))
		}, 200},
		{"the query string", func(e *events.APIGatewayV2HTTPRequest) { e.RawQueryString = "x=" + big }, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
			e := pingEvent(t)
			tc.change(&e)
			resp := f.invoke(t, e)
			b := lambdatest.JSONBody(t, resp)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %.200s, want %d", resp.StatusCode, resp.Body, tc.status)
			}
			if tc.status == 400 && (b["type"] != httpapi.TypeInvalidKey || lambdatest.Header(resp, "Content-Type") != "application/problem+json") {
				t.Errorf("400 body %v, want an invalid-client-key problem", b)
			}
			if tc.status == 200 && b["key"] != "alice" {
				t.Errorf("key %v, want alice", b["key"])
			}
			if len(resp.Body) > 4096 || f.logs.Len() > 4096 {
				t.Errorf("the answer (%d bytes) or the log (%d bytes) carries the oversized part", len(resp.Body), f.logs.Len())
			}
		})
	}
}

// TestForgedProxyContextHeaderIsIgnoredEverywhere extends
// TestSourceIPComesFromTheRequestContext: a client's
// X-GoLambdaProxy-ApiGw-Context header, in any spelling, sets neither the
// request id the audit row and the log record, nor JWT claims.
func TestForgedProxyContextHeaderIsIgnoredEverywhere(t *testing.T) {
	forged := `{"requestId":"forged","http":{"sourceIp":"10.9.9.9"},"authorizer":{"jwt":{"claims":{"sub":"admin"}}}}`
	for _, name := range []string{"x-golambdaproxy-apigw-context", "X-GoLambdaProxy-ApiGw-Context", "X-GOLAMBDAPROXY-APIGW-CONTEXT"} {
		t.Run(name, func(t *testing.T) {
			f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
			resp := f.invoke(t, pingEvent(t, name, forged))
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, resp.Body)
			}
			db := sqlitetest.Inspect(t, f.store.Path())
			if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls WHERE request_id = 'Qx1aBc2dIAMEVxQ='`); n != 1 {
				t.Errorf("%d audit rows with API Gateway's request id, want 1", n)
			}
			if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls WHERE request_id != 'Qx1aBc2dIAMEVxQ='`); n != 0 {
				t.Errorf("%d audit rows with another request id", n)
			}
			if !strings.Contains(f.logs.String(), `"request_id":"Qx1aBc2dIAMEVxQ="`) || strings.Contains(f.logs.String(), "forged") {
				t.Errorf("log: %s", f.logs)
			}

			claims := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromClaim, Claim: "sub"})
			resp = claims.invoke(t, pingEvent(t, name, forged))
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("claim key source with forged claims: %d %s, want 401", resp.StatusCode, resp.Body)
			}
		})
	}
}

// TestKeysThatWereNotUTF8AreRefusedAlike sends, in the event's JSON as the
// runtime receives it, an X-Client-Key holding a lone UTF-16 surrogate
// (\ud800) or a raw 0xFF byte. JSON decoding turns both into U+FFFD before
// the handler sees them, so "a\ud800b", "a\xffb" and "a\x80b" would share
// one counter: they are refused, 400, as the local server refuses the raw
// bytes.
func TestKeysThatWereNotUTF8AreRefusedAlike(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	const placeholder = "PLACEHOLDER-KEY"
	raw, err := json.Marshal(pingEvent(t, "x-client-key", placeholder))
	if err != nil {
		t.Fatal(err)
	}
	for name, inJSON := range map[string]string{"lone surrogate": `a\ud800b`, "raw 0xFF": "a\xffb", "raw continuation byte": "a\x80b"} {
		t.Run(name, func(t *testing.T) {
			event := bytes.Replace(raw, []byte(placeholder), []byte(inJSON), 1)
			var e events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal(event, &e); err != nil {
				t.Fatal(err)
			}
			resp := f.invoke(t, e)
			if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 400 || b["type"] != httpapi.TypeInvalidKey {
				t.Errorf("Lambda: %d %v, want 400 %s", resp.StatusCode, b, httpapi.TypeInvalidKey)
			}
		})
	}
	api := lambdatest.NewAPI(t, service.Options{Store: f.store, Rules: pingRules(pingPolicy, limiter.KeySource{Kind: limiter.KeyFromHeader}), Logger: slog.New(slog.DiscardHandler)})
	r := httptest.NewRequest("GET", "/ping", nil)
	r.Header["X-Client-Key"] = []string{"a\xffb"}
	w := httptest.NewRecorder()
	api.ServeHTTP(w, r)
	if w.Code != 400 {
		t.Errorf("local: %d %s, want 400", w.Code, w.Body)
	}
	if n := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, f.store.Path()), `SELECT count(*) FROM rate_limit_windows`); n != 0 {
		t.Errorf("%d counters written for refused keys", n)
	}
}

// TestProblemInstanceIsTheRawPathBehindAPIGateway: behind API Gateway a
// problem's instance is the event's rawPath, as the client wrote it (the
// proxy parses it into the request's URL), as it is locally: not
// requestContext.http.path, API Gateway's decoded one, in which /nope%2Fx
// reads as /nope/x.
func TestProblemInstanceIsTheRawPathBehindAPIGateway(t *testing.T) {
	f := newLambda(t, limiter.KeySource{Kind: limiter.KeyFromHeader})
	for raw, decoded := range map[string]string{"/nope%2Fx": "/nope/x", "/a%3Fb": "/a?b", "/%20a": "/ a"} {
		e := pingEvent(t)
		e.RawPath, e.RequestContext.HTTP.Path = raw, decoded
		resp := f.invoke(t, e)
		if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 404 || b["instance"] != raw {
			t.Errorf("rawPath %s: %d %v, want a 404 whose instance is %s", raw, resp.StatusCode, b, raw)
		}
	}
}
