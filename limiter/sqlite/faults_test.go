package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/internal/testproc"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// holdLock takes the write lock on the database at path, says "locked",
// and keeps it until its stdin closes.
func holdLock(path string) {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(context.Background())
	if err != nil {
		panic(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		panic(err)
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	conn.ExecContext(context.Background(), `ROLLBACK`)
}

// TestAWaiterKeepsWatchingTheLockItWaitsFor: another process holds the
// lock, a request waits for it, and meanwhile the file is deleted and
// a read of the same process notices, retires the handle and carries on
// in a fresh file. The waiter must go on watching the old
// file's lock through descriptors that stay open, and take its turn when
// the holder lets go. It used to give its reference back, so the retired
// handle was closed under it; it then asked F_GETLK of a closed descriptor
// (EBADF), read that as "held", and waited out the whole busy timeout
// though the lock had been free for long.
func TestAWaiterKeepsWatchingTheLockItWaitsFor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rl.db")
	cfg := storeConfig(path)
	cfg.BusyTimeout = 8 * time.Second
	s := sqlitetest.Open(t, cfg)
	allow(t, s, ping, "first", t0)

	holder := testproc.Command(roleLockHolder, path)
	release, _ := holder.StdinPipe()
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer holder.Wait()
	defer release.Close()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("lock holder said %q", line)
	}

	var wg sync.WaitGroup
	var waitErr error
	wg.Go(func() {
		_, waitErr = s.Allow(context.Background(), storetest.One(ping, "waiter", t0, "", ""))
	})
	for deadline := time.Now().Add(5 * time.Second); s.Stats().Probes == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never looked at the lock")
		}
	}
	// Past the file check interval, a request sees the file gone, retires
	// the handle the waiter watches and opens a fresh file.
	time.Sleep(sqlite.FileCheckInterval)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	// A read, since another decision of this process would wait for the
	// waiter's transaction (it would join the next batch, batch.go).
	if u, err := s.Usage(context.Background(), ping, "meanwhile", t0); err != nil || u.Count != 0 {
		t.Fatalf("read in the fresh file: %+v, %v", u, err)
	}
	release.Close() // the holder lets go
	wg.Wait()
	if waitErr != nil {
		t.Errorf("the waiter failed though the lock was let go: %v", waitErr)
	}
	if n := s.Stats().ProbeFailures; n != 0 {
		t.Errorf("%d looks at the lock failed: the waiter polled descriptors it did not hold open", n)
	}
	if n := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, path), `SELECT count FROM rate_limit_windows WHERE key = 'waiter'`); n != 1 {
		t.Errorf("the waiter's count in the fresh file is %d, want 1", n)
	}
}

// TestAColdStartFindsTheSchemaAnotherMadeMeanwhile: a cold start opens a
// new, empty file (and reads its empty schema with its pragmas); before it
// reads the schema version, another cold start creates the schema; and as
// it prepares its statements, a third process is committing. It must find
// the tables, not fail with "no such table" against the empty schema it
// read first (the flaky failure of racing cold starts). The hook makes the
// race happen every time.
func TestAColdStartFindsTheSchemaAnotherMadeMeanwhile(t *testing.T) {
	// Not t.Parallel: it sets the package-wide open hook.
	path := filepath.Join(t.TempDir(), "new.db")
	var raced, inner, locked atomic.Bool
	var held sync.WaitGroup
	defer held.Wait()
	defer sqlite.SetOpenHook(func(stage, _ string) {
		switch {
		case inner.Load():
			// The other cold start's own open passes through here.
		case stage == "pragmas" && raced.CompareAndSwap(false, true):
			inner.Store(true)
			sqlitetest.Open(t, storeConfig(path))
			inner.Store(false)
		case stage == "migrated" && raced.Load() && locked.CompareAndSwap(false, true):
			conn, err := sqlitetest.Connect(t, path).Conn(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
				t.Error(err)
			}
			held.Go(func() { // a commit that takes a moment
				time.Sleep(100 * time.Millisecond)
				conn.ExecContext(context.Background(), `ROLLBACK`)
				conn.Close()
			})
		}
	})()
	s, err := sqlite.Open(context.Background(), storeConfig(path))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ready(context.Background()); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if !locked.Load() {
		t.Fatal("the race did not happen: no commit came while the statements were prepared")
	}
	if d := allow(t, s, ping, "k", t0); d.Count != 1 {
		t.Errorf("count %d, want 1", d.Count)
	}
}
