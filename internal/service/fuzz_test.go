// Fuzz it for real with:
//
//	go test -fuzz=FuzzStatusQuery -fuzztime=60s ./limiter/httpapi/
//
// With Go 1.26 a timed run can end in a bare "context deadline exceeded" with
// no failing input written: a race in the fuzzing coordinator at the end of
// -fuzztime (golang/go#75804), not a finding. A count such as
// -fuzztime=100000x does not race.
//
// A plain `go test ./limiter/httpapi/` runs the f.Add seeds and the corpus in
// testdata/fuzz/FuzzStatusQuery. FuzzClientKey, which compares this handler
// with the Lambda adapter, is awslambda's.

package service_test

import (
	"database/sql"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
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
	return openCheckedStoreIn(tb, sqlite.DefaultJournalMode)
}

// openCheckedStoreIn opens the store with the given journal mode.
func openCheckedStoreIn(tb testing.TB, journalMode string) *checkedStore {
	tb.Helper()
	s := sqlitetest.Open(tb, sqlite.Config{JournalMode: journalMode, BusyTimeout: 5 * time.Second})
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
	return sqlitetest.Counter(tb, c.db, key, decide.WindowStart(now, fuzzPolicy.Window))
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
	api := lambdatest.NewAPI(f, service.Options{
		Store: c.store, Rules: fuzzRules,
		Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler),
	})
	// Give some keys a count, and show that the write check sees writes: a
	// check that cannot fail proves nothing.
	v0 := c.dataVersion(f)
	for _, key := range []string{"alice", "alice", "clé 鍵", "a,b", "a b"} {
		r := httptest.NewRequest("GET", "/ping", nil)
		r.Header.Set(service.ClientKeyHeader, key)
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
			wantProblem(t, w, 400, service.TypeInvalidQuery, "/status")
		case limiter.ValidKey(key) != nil:
			wantProblem(t, w, 400, service.TypeInvalidKey, "/status")
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
