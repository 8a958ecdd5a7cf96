package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// TestInWALDecisionsReachTheDatabaseFileInTheBackground: a WAL store
// copies its log back into the database file beside its writes
// (checkpoint.go), so that the decision whose commit fills the log does
// not wait for all of it. Without that, 50 decisions (far fewer than the
// 1,000 pages after which SQLite checkpoints inline) stay in the log,
// and the database file alone holds none of them.
func TestInWALDecisionsReachTheDatabaseFileInTheBackground(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rl.db")
	s := sqlitetest.Open(t, sqlite.Config{Path: path, JournalMode: "WAL"})
	wide := limiter.Policy{Name: "ping", Limit: 1_000_000, Window: time.Minute}
	const n = 50
	for i := range n {
		if _, err := s.Allow(context.Background(), storetest.One(wide, fmt.Sprint("k", i), t0, "", "")); err != nil {
			t.Fatal(err)
		}
	}
	var rows int64
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if rows, err = auditRowsInFileAlone(t, path); err == nil && rows == n {
			break
		}
	}
	if rows != n {
		t.Errorf("audit rows in the database file without its log: %d (%v), want all %d decisions", rows, err, n)
	}
	// Closing the store closes the checkpointer's connection too: the last
	// connection to close checkpoints and removes the log, and a clean stop
	// leaves one file.
	s.Close()
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after Close, %s-wal: %v; want it removed", path, err)
	}
}

// auditRowsInFileAlone counts the audit rows of a copy of the database at
// path made without its log: what has been checkpointed into the file.
func auditRowsInFileAlone(t *testing.T, path string) (int64, error) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(copyPath, b, 0o644); err != nil {
		return 0, err
	}
	var rows int64
	db := sqlitetest.Connect(t, copyPath)
	err = db.QueryRow("SELECT count(*) FROM api_calls").Scan(&rows)
	db.Close()
	return rows, err
}

// TestInWALTheCheckpointerStaysOnTheStoresFile: the checkpointing
// connection opened at its first use, by name, so a file that took the
// path after the store opened its own (a restore, which the store
// survives by reopening within FileCheckInterval) got the old file's log
// copied into it while the store went on: 38 of the 40 decisions below
// failed ("no such table"), where none failed without the checkpointer.
// It opens with the store's connection, on the same file.
func TestInWALTheCheckpointerStaysOnTheStoresFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "rl.db")
	s := sqlitetest.Open(t, sqlite.Config{Path: path, JournalMode: "WAL"})
	other := filepath.Join(dir, "other.db")
	db := sqlitetest.Connect(t, other)
	for _, q := range []string{"PRAGMA journal_mode = WAL", "CREATE TABLE t (x)", "INSERT INTO t VALUES (1)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	wide := limiter.Policy{Name: "ping", Limit: 1_000_000, Window: time.Minute}
	failed := 0
	for i := range 40 {
		if _, err := s.Allow(context.Background(), storetest.One(wide, fmt.Sprint("k", i), t0, "", "")); err != nil {
			failed++
			t.Logf("decision %d: %v", i, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
	if failed > 0 {
		t.Errorf("%d of 40 decisions failed in the second after the file was replaced; want none, as without the checkpointer", failed)
	}
}
