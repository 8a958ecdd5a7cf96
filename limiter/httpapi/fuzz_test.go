// Fuzz these for real with:
//
//	go test -fuzz=FuzzClientKey -fuzztime=60s ./limiter/httpapi/
//	go test -fuzz=FuzzStatusQuery -fuzztime=60s ./limiter/httpapi/
//
// With Go 1.26 a timed run can end in a bare "context deadline exceeded" with
// no failing input written: a race in the fuzzing coordinator at the end of
// -fuzztime (golang/go#75804), not a finding. A count such as
// -fuzztime=100000x does not race.
//
// A plain `go test ./limiter/httpapi/` runs the f.Add seeds and the corpora in
// testdata/fuzz/FuzzClientKey and testdata/fuzz/FuzzStatusQuery.

package httpapi_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/awslambda"
	"github.com/ft251/ratelimit/limiter/httpapi"
	"github.com/ft251/ratelimit/limiter/sqlite"
	"github.com/ft251/ratelimit/limiter/sqlite/sqlitetest"
)

// fuzzPolicy is the /ping policy of the fuzz targets: few enough requests
// that repeated inputs reach 429.
var fuzzPolicy = pingPolicy

// fuzzRules put fuzzPolicy on /ping, keyed by the X-Client-Key header.
var fuzzRules = pingRules(limiter.KeySource{Kind: limiter.KeyFromHeader})

// checkedStore is a real SQLite store in a temporary directory, opened once
// per fuzz target rather than per input, with a second, read-only
// connection to the same file that reads back what the store wrote.
type checkedStore struct {
	store *sqlite.Store
	db    *sql.DB // sqlitetest.Inspect: one connection, kept open
}

func openCheckedStore(tb testing.TB) *checkedStore {
	tb.Helper()
	return openCheckedStoreIn(tb, limiter.DefaultJournalMode)
}

// openCheckedStoreIn opens the store with the given journal mode.
func openCheckedStoreIn(tb testing.TB, journalMode string) *checkedStore {
	tb.Helper()
	s := sqlitetest.Open(tb, limiter.StoreConfig{JournalMode: journalMode, BusyTimeout: 5 * time.Second})
	return &checkedStore{store: s, db: sqlitetest.Inspect(tb, s.Path())}
}

func (c *checkedStore) int(tb testing.TB, query string, args ...any) int64 {
	tb.Helper()
	return sqlitetest.QueryInt(tb, c.db, query, args...)
}

func (c *checkedStore) tables(tb testing.TB) sqlitetest.Rows {
	tb.Helper()
	return sqlitetest.CountRows(tb, c.db)
}

// dataVersion changes whenever another connection has committed a change to
// the file since this connection last asked.
func (c *checkedStore) dataVersion(tb testing.TB) int64 {
	tb.Helper()
	return c.int(tb, `PRAGMA data_version`)
}

// stored reports the counter row of key in the window of now, matching the
// key's bytes exactly: how many rows match, and the count of the row.
func (c *checkedStore) stored(tb testing.TB, key string) (rows, count int64) {
	tb.Helper()
	return sqlitetest.Counter(tb, c.db, key, limiter.WindowStart(now, fuzzPolicy.Window))
}

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
	return answer{status: r.StatusCode, body: []byte(r.Body), header: func(name string) string {
		for k, v := range r.Headers {
			if strings.EqualFold(k, name) {
				return v
			}
		}
		return ""
	}}
}

// checkKeyAnswer checks the answer to GET /ping with sent as the raw
// X-Client-Key value: a 400 invalid-key problem that wrote nothing, or a 200
// or 429 for the key exactly as sent, whose counter row holds the key
// byte for byte. An empty header means the fallback key.
func checkKeyAnswer(t *testing.T, c *checkedStore, path, sent string, a answer, before sqlitetest.Rows) {
	t.Helper()
	// Spaces and tabs around the value are not part of the key (net/http
	// trims them before the handler; the handler trims the raw value API
	// Gateway passes); an empty value is the fallback key.
	want := strings.Trim(sent, " \t")
	if want == "" {
		want = httpapi.FallbackKey
	}
	var body map[string]any
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Fatalf("%s: key %q: body %q is not a JSON object: %v", path, sent, a.body, err)
	}
	after := c.tables(t)
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
	rows, count := c.stored(t, want)
	if rows != 1 {
		t.Fatalf("%s: key %q: %d counter rows hold the key byte for byte, want 1", path, sent, rows)
	}
	switch a.status {
	case http.StatusOK:
		if body["key"] != want {
			t.Fatalf("%s: body key %q, want %q exactly", path, body["key"], want)
		}
		if body["count"] != float64(count) || count < 1 || count > fuzzPolicy.Limit {
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
		if count <= fuzzPolicy.Limit || after.Calls != before.Calls {
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

	local := openCheckedStore(f)
	localAPI := httpapi.New(httpapi.Options{
		Store: local.store, Rules: fuzzRules,
		Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler),
	})
	remote := openCheckedStore(f)
	lambdaHandler := awslambda.HTTP(httpapi.New(httpapi.Options{
		Store: remote.store, Rules: fuzzRules,
		Now: func() time.Time { return now }, Caller: awslambda.Caller, Logger: slog.New(slog.DiscardHandler),
	}))
	fixture, err := os.ReadFile(filepath.Join("..", "..", "events", "ping.json"))
	if err != nil {
		f.Fatal(err)
	}
	var event events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(fixture, &event); err != nil {
		f.Fatal(err)
	}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "fuzz"})

	f.Fuzz(func(t *testing.T, key string) {
		before := local.tables(t)
		r := httptest.NewRequest("GET", "/ping", nil)
		r.Header.Set(httpapi.ClientKeyHeader, key)
		if got := strings.Join(r.Header.Values(httpapi.ClientKeyHeader), ","); got != key {
			t.Skipf("net/http altered the header from %q to %q before the handler", key, got)
		}
		w := httptest.NewRecorder()
		localAPI.ServeHTTP(w, r)
		checkKeyAnswer(t, local, "local", key, fromRecorder(w), before)

		before = remote.tables(t)
		e := event
		e.Headers = maps.Clone(event.Headers)
		e.Headers["x-client-key"] = key
		resp, err := lambdaHandler(ctx, e)
		if err != nil {
			t.Fatalf("lambda: key %q: invocation error %v", key, err)
		}
		checkKeyAnswer(t, remote, "lambda", key, fromEvent(resp), before)
	})
}

// FuzzStatusQuery sends arbitrary raw query strings to /status, set on
// r.URL.RawQuery so that nothing parses or cleans them first. The answer is a
// 400 problem exactly when the query is malformed, lacks a single non-empty
// key, or the key is invalid; otherwise a 200 with the stored count of exactly
// that key. It never writes: the row counts and SQLite's data_version, which
// changes on any commit by another connection, stay the same.
func FuzzStatusQuery(f *testing.F) {
	for _, seed := range []string{
		"key=alice", "", "key=", "key", "=", "&&", "key=a&key=b", "key=&key=alice", "key=alice&key=",
		"key=%zz", "key=%", "key=a;b", "key=alice;", "key=%00", "key=a%00b", "key=%ff", "key=%C3",
		"key=a+b", "key=a%2Bb", "key=a%2Cb", "key=a,b", "key=a b", "key=alice#frag", "KEY=alice",
		"key=alice&other=1", "other=1&key=alice", "key=" + url.QueryEscape("clé 鍵"), "key=clé 鍵",
		"key=%E2%80%AEevil", "key=" + strings.Repeat("x", 256), "key=" + strings.Repeat("x", 257),
		"key=" + strings.Repeat("%F0%9F%94%91", 64), "key=" + url.QueryEscape("'; DROP TABLE rate_limit_windows; --"),
		"key=alice\x00", "key=\r\n", "key=%0D%0A",
	} {
		f.Add(seed)
	}

	c := openCheckedStore(f)
	api := httpapi.New(httpapi.Options{
		Store: c.store, Rules: fuzzRules,
		Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler),
	})
	// Give some keys a count, and show that the write check sees writes: a
	// check that cannot fail proves nothing.
	v0 := c.dataVersion(f)
	for _, key := range []string{"alice", "alice", "clé 鍵", "a,b", "a b"} {
		r := httptest.NewRequest("GET", "/ping", nil)
		r.Header.Set(httpapi.ClientKeyHeader, key)
		api.ServeHTTP(httptest.NewRecorder(), r)
	}
	if c.dataVersion(f) == v0 {
		f.Fatal("data_version did not change after /ping wrote: the write check is blind")
	}

	f.Fuzz(func(t *testing.T, q string) {
		before, v := c.tables(t), c.dataVersion(t)
		r := httptest.NewRequest("GET", "/status", nil)
		r.URL.RawQuery = q
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		if after := c.tables(t); after != before {
			t.Fatalf("/status?%s changed the tables from %+v to %+v", q, before, after)
		}
		if c.dataVersion(t) != v {
			t.Fatalf("/status?%s committed a write", q)
		}

		vals, err := url.ParseQuery(q)
		keys := vals["key"]
		key := "" // spaces and tabs around it are not part of it, as for /ping
		if len(keys) == 1 {
			key = strings.Trim(keys[0], " \t")
		}
		switch {
		case err != nil || len(keys) != 1 || key == "":
			wantProblem(t, w, 400, httpapi.TypeInvalidQuery, "/status")
		case limiter.ValidKey(key) != nil:
			wantProblem(t, w, 400, httpapi.TypeInvalidKey, "/status")
		default:
			if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("/status?%s: %d %s, want 200 JSON for key %q", q, w.Code, w.Body, key)
			}
			body := decode(t, w)
			_, count := c.stored(t, key)
			if body["key"] != key || body["count"] != float64(count) || body["limit"] != float64(3) ||
				body["remaining"] != float64(max(3-count, 0)) {
				t.Fatalf("/status?%s: body %v, want key %q with stored count %d", q, body, key, count)
			}
		}
		if t.Failed() {
			t.FailNow()
		}
	})
}
