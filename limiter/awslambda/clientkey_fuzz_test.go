// Fuzz it for real with:
//
//	go test -fuzz=FuzzClientKey -fuzztime=60s ./limiter/awslambda/
//
// (A count such as -fuzztime=100000x avoids golang/go#75804; see
// fuzz_test.go.) A plain `go test ./limiter/awslambda/` runs the f.Add
// seeds and the corpus in testdata/fuzz/FuzzClientKey.

package awslambda_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/httpapi"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// answer is a response from either path: httptest or the Lambda adapter.
type answer struct {
	status int
	header func(string) string
	body   []byte
}

func fromRecorder(w *httptest.ResponseRecorder) answer {
	return answer{status: w.Code, header: w.Header().Get, body: w.Body.Bytes()}
}

func fromEvent(r events.APIGatewayV2HTTPResponse) answer {
	return answer{status: r.StatusCode, body: []byte(r.Body), header: func(name string) string { return lambdatest.Header(r, name) }}
}

// checkKeyAnswer checks the answer to GET /ping with sent as the raw
// X-Client-Key value, given the rows of the store's tables before it (db is
// a second connection to the store's file): a 400 invalid-key problem that
// wrote nothing, or a 200 or 429 for the key exactly as sent, whose counter
// row holds the key byte for byte. An empty header means the fallback key.
func checkKeyAnswer(t *testing.T, db *sql.DB, path, sent string, a answer, before sqlitetest.Rows) {
	t.Helper()
	// Spaces and tabs around the value are not part of the key (net/http
	// trims them before the handler; the handler trims the raw value API
	// Gateway passes); an empty value is the fallback key.
	want := strings.Trim(sent, " \t")
	if want == "" {
		want = service.FallbackKey
	}
	var body map[string]any
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("%s: key %q: body %q is not a JSON object: %v", path, sent, a.body, err)
	}
	after := sqlitetest.CountRows(t, db)
	if limiter.ValidKey(want) != nil {
		if a.status != http.StatusBadRequest || a.header("Content-Type") != "application/problem+json" ||
			body["type"] != httpapi.TypeInvalidKey || body["status"] != float64(400) {
			t.Fatalf("%s: invalid key %q: %d %s, want a 400 invalid-client-key problem", path, sent, a.status, a.body)
		}
		if after != before {
			t.Fatalf("%s: invalid key %q changed the tables from %+v to %+v", path, sent, before, after)
		}
		return
	}
	rows, count := sqlitetest.Counter(t, db, want, decide.WindowStart(fixtureNow, pingPolicy.Window))
	if rows != 1 {
		t.Fatalf("%s: key %q: %d counter rows hold the key byte for byte, want 1", path, sent, rows)
	}
	switch a.status {
	case http.StatusOK:
		if body["key"] != want {
			t.Fatalf("%s: body key %q, want %q exactly", path, body["key"], want)
		}
		if body["count"] != float64(count) || count < 1 || count > pingPolicy.Limit {
			t.Fatalf("%s: key %q: body count %v, stored count %d", path, sent, body["count"], count)
		}
		if after.Calls != before.Calls+1 {
			t.Fatalf("%s: key %q: allowed, but audit rows went from %d to %d", path, sent, before.Calls, after.Calls)
		}
	case http.StatusTooManyRequests:
		detail := "Rate limit of 3 requests per 60s exceeded for key '" + want + "'."
		if body["type"] != httpapi.TypeRateLimited || body["status"] != float64(429) || body["detail"] != detail {
			t.Fatalf("%s: key %q: 429 body %s, want detail %q", path, sent, a.body, detail)
		}
		if ra, err := strconv.Atoi(a.header("Retry-After")); err != nil || ra < 1 {
			t.Fatalf("%s: key %q: Retry-After %q", path, sent, a.header("Retry-After"))
		}
		if count <= pingPolicy.Limit || after.Calls != before.Calls {
			t.Fatalf("%s: key %q: rejected at stored count %d with audit rows %d -> %d", path, sent, count, before.Calls, after.Calls)
		}
	default:
		t.Fatalf("%s: valid key %q: %d %s, want 200 or 429", path, sent, a.status, a.body)
	}
	if d := after.Windows - before.Windows; d != 0 && d != 1 {
		t.Fatalf("%s: key %q: one request added %d counter rows", path, sent, d)
	}
}

// FuzzClientKey sends arbitrary bytes as the X-Client-Key value down both
// paths a request can take: straight into the handler (the local server), and
// as the raw header of an API Gateway v2 event through the Lambda adapter,
// which splits header values on commas but whose Caller reads the raw value.
// Each path has its own store. Either way the answer is a 400 problem for an
// invalid key, or a 200/429 for exactly the bytes sent, stored exactly.
func FuzzClientKey(f *testing.F) {
	for _, seed := range []string{
		"alice", "", "a,b", "a, b", " lead", "trail ", "a,,b", ",", "127.0.0.1",
		"'; DROP TABLE rate_limit_windows; --", `" OR 1=1 --`, "%41", "a%00b", "a+b",
		"clé 鍵", "🔑", "👨\u200d👩\u200d👧", "مفتاح", "e\u0301", "\u202eevil", "\ufeffbom", "\u2028",
		strings.Repeat("x", 256), strings.Repeat("x", 257), strings.Repeat("🔑", 64),
		(strings.Repeat("x", 254) + "🔑")[:256],
		"a\x00b", "a\r\nX-Other: 1", "\t", "\x1f", "\x7f", "\u0085", "\xff", "\xc3",
	} {
		f.Add(seed)
	}

	cfg := sqlite.Config{BusyTimeout: 5 * time.Second}
	discard := slog.New(slog.DiscardHandler)
	local := sqlitetest.Open(f, cfg)
	localDB := sqlitetest.Inspect(f, local.Path())
	localAPI := lambdatest.NewAPI(f, service.Options{
		Store: local, Rules: pingRules(pingPolicy, limiter.KeySource{Kind: limiter.KeyFromHeader}),
		Now: func() time.Time { return fixtureNow }, Logger: discard,
	})
	remote := newLambdaWith(f, service.Options{Store: sqlitetest.Open(f, cfg), Logger: discard})
	remoteDB := sqlitetest.Inspect(f, remote.store.Path())
	event := lambdatest.ReadEvent[events.APIGatewayV2HTTPRequest](f, "ping.json")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "fuzz"})

	f.Fuzz(func(t *testing.T, key string) {
		before := sqlitetest.CountRows(t, localDB)
		r := httptest.NewRequest("GET", "/ping", nil)
		r.Header.Set(service.ClientKeyHeader, key)
		if got := strings.Join(r.Header.Values(service.ClientKeyHeader), ","); got != key {
			// net/http altered the header before the handler: another
			// key than the one under test.
			return
		}
		w := httptest.NewRecorder()
		localAPI.ServeHTTP(w, r)
		checkKeyAnswer(t, localDB, "local", key, fromRecorder(w), before)

		before = sqlitetest.CountRows(t, remoteDB)
		e := event
		e.Headers = maps.Clone(event.Headers)
		e.Headers["x-client-key"] = key
		resp, err := remote.handler(ctx, e)
		if err != nil {
			t.Fatalf("lambda: key %q: invocation error %v", key, err)
		}
		checkKeyAnswer(t, remoteDB, "lambda", key, fromEvent(resp), before)
	})
}
