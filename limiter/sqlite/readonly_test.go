package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/internal/testproc"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

func readOnlyConfig(path string) sqlite.Config {
	cfg := storeConfig(path)
	cfg.ReadOnly = true
	return cfg
}

func TestReadOnlyStoreReadsWhatWritersCommitted(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rl.db")
	w := sqlitetest.Open(t, storeConfig(path))
	allow(t, w, ping, "alice", t0)
	allow(t, w, ping, "alice", t0)
	r := sqlitetest.Open(t, readOnlyConfig(path))
	if u, err := r.Usage(context.Background(), ping, "alice", t0); err != nil || u.Count != 2 {
		t.Fatalf("read-only usage = %+v, %v; want count 2", u, err)
	}
	if _, err := r.Allow(context.Background(), storetest.One(ping, "alice", t0, "", "")); !errors.Is(err, limiter.ErrUnavailable) {
		t.Errorf("read-only Allow = %v; want ErrUnavailable: it must not write", err)
	}
	if n := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, path), `SELECT count FROM rate_limit_windows`); n != 2 {
		t.Errorf("count after read-only use = %d, want 2", n)
	}
}

func TestReadOnlyStoreNeverCreatesTheFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rl.db")
	r, err := sqlite.Open(context.Background(), readOnlyConfig(path))
	if err != nil {
		t.Fatalf("read-only open of a missing file = %v; want a store", err)
	}
	defer r.Close()
	if err := r.Ready(context.Background()); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("read-only store on a missing file: ready = %v; want ErrUnavailable", err)
	}
	// Nothing was ever counted in a database nobody created: count 0.
	if u, err := r.Usage(context.Background(), ping, "alice", t0); err != nil || u.Count != 0 || u.Remaining != ping.Limit {
		t.Errorf("usage before the database exists = %+v, %v; want count 0", u, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("read-only open created %s", path)
	}
	// But a missing directory is a fault, not an empty database.
	lost, err := sqlite.Open(context.Background(), readOnlyConfig(filepath.Join(path+".d", "rl.db")))
	if err != nil {
		t.Fatal(err)
	}
	defer lost.Close()
	if _, err := lost.Usage(context.Background(), ping, "alice", t0); !errors.Is(err, limiter.ErrUnavailable) {
		t.Errorf("usage with the directory missing = %v, want ErrUnavailable", err)
	}
	// Once a writer has created and migrated it, the reader recovers.
	allow(t, sqlitetest.Open(t, storeConfig(path)), ping, "alice", t0)
	if u, err := r.Usage(context.Background(), ping, "alice", t0); err != nil || u.Count != 1 {
		t.Errorf("usage after a writer created the file = %+v, %v; want count 1", u, err)
	}
}

// TestHotJournalFromACrashedWriter kills a writer in the middle of a
// transaction that has already changed the database file. A reader on a
// read-only mount cannot roll the journal back, so it answers unavailable
// rather than read half a transaction; the next writer rolls it back, and
// every committed decision is still there.
func TestHotJournalFromACrashedWriter(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rl.db")
	w := sqlitetest.Open(t, storeConfig(path))
	allow(t, w, ping, "alice", t0)
	allow(t, w, ping, "alice", t0)
	w.Close()

	child := testproc.Command(roleCrashingWriter, path)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "spilled\n" {
		child.Process.Kill()
		t.Fatalf("writer said %q, %v", line, err)
	}
	child.Process.Kill() // SIGKILL: no rollback, no unlock, no cleanup
	child.Wait()
	if fi, err := os.Stat(path + "-journal"); err != nil || fi.Size() == 0 {
		t.Fatalf("no hot journal after the crash: %v", err)
	}

	r, err := sqlite.Open(context.Background(), readOnlyConfig(path))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := r.Ready(context.Background()); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("read-only ready with a hot journal = %v; want ErrUnavailable", err)
	}
	if _, err := r.Usage(context.Background(), ping, "alice", t0); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("read-only usage with a hot journal = %v; want ErrUnavailable", err)
	}

	w = sqlitetest.Open(t, storeConfig(path)) // a writer (the next /ping) rolls the journal back
	if d := allow(t, w, ping, "alice", t0); d.Count != 3 {
		t.Errorf("count after recovery = %d, want 3: two committed, the crashed +1000 rolled back, one new", d.Count)
	}
	if _, err := os.Stat(path + "-journal"); !os.IsNotExist(err) {
		t.Errorf("journal still there after a writer opened: %v", err)
	}
	if u, err := r.Usage(context.Background(), ping, "alice", t0); err != nil || u.Count != 3 {
		t.Errorf("read-only usage after recovery = %+v, %v; want count 3", u, err)
	}
	db := sqlitetest.Inspect(t, path)
	if s := sqlitetest.QueryString(t, db, `PRAGMA integrity_check`); s != "ok" {
		t.Errorf("integrity_check = %q", s)
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls WHERE key = 'crash'`); n != 0 {
		t.Errorf("%d audit rows of the crashed transaction survived", n)
	}
}
