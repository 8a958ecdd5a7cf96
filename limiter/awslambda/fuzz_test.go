// Fuzz these for real with:
//
//	go test -fuzz=FuzzPingEvent -fuzztime=60s ./limiter/awslambda/
//	go test -fuzz=FuzzStatusEvent -fuzztime=60s ./limiter/awslambda/
//
// With Go 1.26 a timed run can end in a bare "context deadline exceeded" with
// no failing input written: a race in the fuzzing coordinator at the end of
// -fuzztime (golang/go#75804), not a finding. A count such as
// -fuzztime=100000x does not race.
//
// A plain `go test ./limiter/awslambda/` runs the seeds: every fixture in
// events/, and the odd events in testdata/fuzz/FuzzPingEvent and
// testdata/fuzz/FuzzStatusEvent.

package awslambda_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"net/http"
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
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/awslambda"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// eventTarget is one Lambda function as its main.go wires it, on a real
// SQLite store opened once per fuzz target rather than per input.
type eventTarget struct {
	route   string
	handler awslambda.HTTPHandler
	// db is a second, read-only connection to the store's file, kept open
	// for good so that PRAGMA data_version compares like with like.
	db *sql.DB
}

// newEventTarget builds the function serving route. The ping function writes
// through its own store; the status function, as in production, reads through
// a read-only store a file that a writer created and gave some counts.
func newEventTarget(f *testing.F, route string) *eventTarget {
	f.Helper()
	cfg := sqlite.Config{BusyTimeout: 5 * time.Second}
	writer := sqlitetest.Open(f, cfg)
	store := writer
	if route == service.RouteStatus {
		for _, key := range []string{"alice", "alice", "clé 鍵", "a,b"} {
			if _, err := writer.Allow(context.Background(), storetest.One(pingPolicy, key, fixtureNow, "", "")); err != nil {
				f.Fatal(err)
			}
		}
		cfg.Path, cfg.ReadOnly = writer.Path(), true
		store = sqlitetest.Open(f, cfg)
	}
	fx := newLambdaWith(f, service.Options{
		Store:    store,
		FailMode: limiter.FailClosed,
		Routes:   []string{route},
		Logger:   slog.New(slog.DiscardHandler),
	})
	return &eventTarget{route: route, handler: fx.handler, db: sqlitetest.Inspect(f, writer.Path())}
}

func (e *eventTarget) int(tb testing.TB, query string, args ...any) int64 {
	tb.Helper()
	return sqlitetest.QueryInt(tb, e.db, query, args...)
}

// state is what a read must leave unchanged: the row counts, and SQLite's
// data_version, which changes whenever another connection commits.
type state struct {
	rows    sqlitetest.Rows
	version int64
}

func (e *eventTarget) state(tb testing.TB) state {
	tb.Helper()
	return state{rows: sqlitetest.CountRows(tb, e.db), version: e.int(tb, `PRAGMA data_version`)}
}

// addFixtures seeds f with every event in events/.
func addFixtures(f *testing.F) {
	for _, name := range lambdatest.EventNames(f) {
		f.Add(lambdatest.Event(f, name))
	}
}

// addOddEvents seeds f with events no fixture has. More, built from the
// fixtures, are in testdata/fuzz.
func addOddEvents(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `"GET /ping"`, `{"rawPath":"/ping"}`, `{"rawPath":"/status","rawQueryString":"key=alice"}`,
		`{"rawPath":"/ping","requestContext":null,"headers":null}`,
		`{"rawPath":"/ping","requestContext":{"http":{"method":"get"}},"headers":{"X-Client-Key":"Bob"}}`,
		`{"rawPath":"/ping","requestContext":{"http":{"method":"GET "}}}`,
		`{"rawPath":"//ping","requestContext":{"http":{"method":"GET"}}}`,
		`{"rawPath":"/ping?x","requestContext":{"http":{"method":"GET"}}}`,
		`{"rawPath":"/ping%00","requestContext":{"http":{"method":"GET"}}}`,
		`{"rawPath":"/ping","isBase64Encoded":true,"body":"%%%"}`,
		`{"rawPath":"/ping","headers":{"x-client-key":"a\u0000b"}}`,
		`{"rawPath":"/ping","headers":{"x-client-key":"\ud800"}}`,
		`{"rawPath":"/status","rawQueryString":"key=%zz"}`,
		`{"rawPath":"/status","queryStringParameters":{"key":"a,b"}}`,
		`{"rawPath":"/ping","requestContext":{"domainName":"a:b"}}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzPingEvent feeds arbitrary API Gateway v2 events to the ping function.
func FuzzPingEvent(f *testing.F) {
	addFixtures(f)
	addOddEvents(f)
	fuzzEvents(f, newEventTarget(f, service.RoutePing))
}

// FuzzStatusEvent feeds arbitrary API Gateway v2 events to the status
// function, which must also never write.
func FuzzStatusEvent(f *testing.F) {
	addFixtures(f)
	addOddEvents(f)
	fuzzEvents(f, newEventTarget(f, service.RouteStatus))
}

// fuzzEvents checks that whatever event the Lambda runtime can decode, the
// function answers with an HTTP response and never an invocation error: a
// status in 200..599 (and, with a healthy store, never 5xx), a Content-Type,
// and a JSON object body; a problem carries type, title, and status equal to
// the response's; a 200 from /ping names a valid key with a count of at least
// one; a 429 says when to retry.
func fuzzEvents(f *testing.F, target *eventTarget) {
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "fuzz"})
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &e); err != nil {
			// The Lambda runtime rejects events that do not decode, before
			// the handler: nothing to check. (Not a skip: .ci/run fails
			// on skipped tests, which mean a missing tool.)
			return
		}
		before := target.state(t)
		resp, err := target.handler(ctx, e)
		if err != nil {
			t.Fatalf("invocation error %v for event %s", err, raw)
		}
		if resp.StatusCode < 200 || resp.StatusCode > 599 {
			t.Fatalf("status %d for event %s", resp.StatusCode, raw)
		}
		if resp.StatusCode >= 500 {
			t.Fatalf("status %d with a healthy store, for event %s: %s", resp.StatusCode, raw, resp.Body)
		}
		ct := lambdatest.Header(resp, "Content-Type")
		if ct == "" {
			t.Fatalf("no Content-Type in %v, for event %s", resp.Headers, raw)
		}
		if strings.ToUpper(e.RequestContext.HTTP.Method) == http.MethodHead {
			// A HEAD is answered as its GET would be, without the body.
			if resp.Body != "" {
				t.Fatalf("HEAD answered with a body %q, for event %s", resp.Body, raw)
			}
			if target.route == service.RouteStatus && target.state(t) != before {
				t.Fatalf("the status function wrote, for event %s", raw)
			}
			return
		}
		var b map[string]any
		if resp.IsBase64Encoded || json.Unmarshal([]byte(resp.Body), &b) != nil || b == nil {
			t.Fatalf("body %q (base64: %t) is not a JSON object, for event %s", resp.Body, resp.IsBase64Encoded, raw)
		}
		switch ct {
		case "application/problem+json":
			typ, _ := b["type"].(string)
			title, _ := b["title"].(string)
			if typ == "" || title == "" || b["status"] != float64(resp.StatusCode) {
				t.Fatalf("problem %v with status %d, for event %s", b, resp.StatusCode, raw)
			}
		case "application/json":
			if resp.StatusCode != 200 {
				t.Fatalf("%d with a non-problem body %s, for event %s", resp.StatusCode, resp.Body, raw)
			}
			key, _ := b["key"].(string)
			count, ok := b["count"].(float64)
			if err := limiter.ValidKey(key); err != nil || !ok || count != float64(int64(count)) || count < 0 {
				t.Fatalf("200 body %s: key %v, count %v, for event %s", resp.Body, err, b["count"], raw)
			}
			if target.route == service.RoutePing {
				if count < 1 {
					t.Fatalf("/ping 200 with count %v, for event %s", count, raw)
				}
				if rows, n := sqlitetest.Counter(t, target.db, key, decide.WindowStart(fixtureNow, pingPolicy.Window)); rows != 1 || float64(n) != count {
					t.Fatalf("/ping 200 for key %q with count %v, but the store has %d rows, count %d", key, count, rows, n)
				}
			}
		default:
			t.Fatalf("Content-Type %q, for event %s", ct, raw)
		}
		if resp.StatusCode == 429 {
			if ra, err := strconv.Atoi(lambdatest.Header(resp, "Retry-After")); err != nil || ra < 1 {
				t.Fatalf("429 with Retry-After %q, for event %s", lambdatest.Header(resp, "Retry-After"), raw)
			}
		}
		if target.route == service.RouteStatus {
			if after := target.state(t); after != before {
				t.Fatalf("the status function wrote: %+v -> %+v, for event %s", before, after, raw)
			}
		}
	})
}
