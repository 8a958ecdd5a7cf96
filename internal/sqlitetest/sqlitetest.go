// Package sqlitetest is what tests in any package need to run against real
// SQLite, after wtf's MustOpenDB(tb): a store in a temporary directory that
// is ready or fails the test, and second connections to its file that look
// at what the store wrote, as another process or a person with the sqlite3
// shell would.
package sqlitetest

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/sqlitetune"
	"github.com/ft251/ratelimit/internal/stores"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// Open opens a store with cfg, on a fresh file in tb.TempDir() when
// cfg.Path is empty, and fails the test unless it is Ready: the database
// exists, migrated, before the test goes on. The store is closed when the
// test ends.
func Open(tb testing.TB, cfg sqlite.Config) *sqlite.Store {
	tb.Helper()
	return OpenTuned(tb, cfg, sqlitetune.Options{})
}

// OpenTuned is Open, with the store's measuring knobs set.
func OpenTuned(tb testing.TB, cfg sqlite.Config, tune sqlitetune.Options) *sqlite.Store {
	tb.Helper()
	if cfg.Path == "" {
		cfg.Path = Path(tb)
	}
	s, err := sqlite.Open(sqlitetune.With(context.Background(), tune), cfg)
	if err != nil {
		tb.Fatalf("open %s: %v", cfg.Path, err)
	}
	tb.Cleanup(func() { s.Close() })
	if err := s.Ready(context.Background()); err != nil {
		tb.Fatalf("open %s: %v", cfg.Path, err)
	}
	return s
}

// OpenShards has s open every one of its shards (stores.OpenShards), or
// fails the test: Ready opens shard 0 alone, and a test that reads every
// file beside the store needs them all there.
func OpenShards(tb testing.TB, s *sqlite.Store) {
	tb.Helper()
	if err := stores.OpenShards(context.Background(), s); err != nil {
		tb.Fatal(err)
	}
}

// Broken is a store whose directory does not exist, as an EFS mount that
// is not there: every call fails as limiter.ErrUnavailable, and quickly
// (its busy timeout is a second).
func Broken(tb testing.TB) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(tb.TempDir(), "missing", "rl.db"), BusyTimeout: time.Second})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// Path is a database path in a fresh temporary directory, with no file yet.
func Path(tb testing.TB) string {
	return filepath.Join(tb.TempDir(), "ratelimit.db")
}

// busyTimeout is how long the connections below wait for a store's lock:
// the store holds it for one decision at a time.
const busyTimeout = 5 * time.Second

// Inspect opens a read-only connection to the database at path (SQLite's
// mode=ro), for reading back what a store wrote: it cannot change what it
// checks. It is one connection, kept open until the test ends, so that
// PRAGMA data_version (which changes when another connection commits)
// compares like with like; read a query's rows to the end before the next.
func Inspect(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	db := open(tb, path, "mode=ro")
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db
}

// Connect opens a read-write connection to the database at path, for what
// a test does as another process would: writing rows a store did not,
// changing the schema's version, holding the lock.
func Connect(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	return open(tb, path, "")
}

func open(tb testing.TB, path, query string) *sql.DB {
	tb.Helper()
	q := fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeout.Milliseconds())
	if query != "" {
		q = query + "&" + q
	}
	// A file: URI with the path escaped, so that '?', '#' and '%' in it
	// stay part of the name.
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// QueryInt runs a query of one integer and returns it, failing the test if
// it cannot.
func QueryInt(tb testing.TB, db *sql.DB, query string, args ...any) int64 {
	tb.Helper()
	var n int64
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// QueryString runs a query of one string and returns it, failing the test
// if it cannot.
func QueryString(tb testing.TB, db *sql.DB, query string, args ...any) string {
	tb.Helper()
	var s string
	if err := db.QueryRow(query, args...).Scan(&s); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return s
}

// Rows is how many rows each of the store's tables holds.
type Rows struct{ Windows, Calls int64 }

// CountRows counts the rows of both tables: what a request must add, or
// must not.
func CountRows(tb testing.TB, db *sql.DB) Rows {
	tb.Helper()
	return Rows{
		Windows: QueryInt(tb, db, `SELECT count(*) FROM rate_limit_windows`),
		Calls:   QueryInt(tb, db, `SELECT count(*) FROM api_calls`),
	}
}

// Counter finds the counter rows of key in the window starting at start,
// matching the key's bytes exactly (as hex), not through any collation or
// driver conversion: how many rows match, and the count of the one that
// does.
func Counter(tb testing.TB, db *sql.DB, key string, start time.Time) (rows, count int64) {
	tb.Helper()
	x := strings.ToUpper(hex.EncodeToString([]byte(key)))
	w := decide.FormatWindow(start)
	rows = QueryInt(tb, db, `SELECT count(*) FROM rate_limit_windows WHERE hex(key) = ?1 AND window_start = ?2`, x, w)
	if rows == 1 {
		count = QueryInt(tb, db, `SELECT count FROM rate_limit_windows WHERE hex(key) = ?1 AND window_start = ?2`, x, w)
	}
	return rows, count
}

// ChangeCounter reads the database header's file change counter, which
// SQLite increments once per committed write transaction in rollback-journal
// mode. (Reading the file opens and closes it, which would drop this
// process's locks on it: read it only while no store of this process is in
// a transaction on it.)
func ChangeCounter(tb testing.TB, path string) uint32 {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var hdr [28]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		tb.Fatal(err)
	}
	return binary.BigEndian.Uint32(hdr[24:28])
}
