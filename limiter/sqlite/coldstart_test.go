package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/testproc"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// Roles of cold-start tests: processes that hold a lock on a file until
// their stdin closes, as other cold starts and requests do for a moment.
const (
	// roleReservedHolder holds the write lock (RESERVED, BEGIN
	// IMMEDIATE), as a cold start migrating a new file does: others may
	// still read.
	roleReservedHolder = "reserved lock holder"
	// roleReader holds a read transaction (SHARED), as a process reading
	// the schema version does, which a commit must wait for.
	roleReader = "reader"
)

// holdWith opens path, runs begin (and query, to take a read lock), says
// "locked", and holds it until stdin closes.
func holdWith(begin, query string) func(path string) {
	return func(path string) {
		db, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			panic(err)
		}
		db.SetMaxOpenConns(1)
		conn, err := db.Conn(context.Background())
		if err != nil {
			panic(err)
		}
		if _, err := conn.ExecContext(context.Background(), begin); err != nil {
			panic(err)
		}
		if query != "" {
			var n int
			if err := conn.QueryRowContext(context.Background(), query).Scan(&n); err != nil {
				panic(err)
			}
		}
		fmt.Println("locked")
		io.Copy(io.Discard, os.Stdin)
		conn.ExecContext(context.Background(), `ROLLBACK`)
	}
}

// holdLockOf starts role on path, waits until it holds its lock, and
// returns the function that lets it go.
func holdLockOf(t *testing.T, role, path string) (release func()) {
	t.Helper()
	holder := testproc.Command(role, path)
	stdin, _ := holder.StdinPipe()
	out, _ := holder.StdoutPipe()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		stdin.Close()
		holder.Wait()
		t.Fatalf("%s said %q", role, line)
	}
	var once atomic.Bool
	release = func() {
		if once.CompareAndSwap(false, true) {
			stdin.Close()
			holder.Wait()
		}
	}
	t.Cleanup(release)
	return release
}

// TestAColdStartWaitsForALockWhereItFindsIt: a cold start on a new file
// finds another process's lock in its way: a commit's (EXCLUSIVE), which
// its reads must wait for; another cold start's migration (RESERVED),
// which its own migration must wait for; a reader's (SHARED), which the
// commit of its migration must wait for. Each time it waits where it
// stands, and opens the file once. It used to give up on the first
// SQLITE_BUSY, close the file and open it again from the start, over and
// over while the lock was held: sixteen cold starts on a new file on the
// EFS model then kept each other from ever finishing (BENCHMARKS.md).
func TestAColdStartWaitsForALockWhereItFindsIt(t *testing.T) {
	// Not t.Parallel: it sets the package-wide open hook.
	for _, tc := range []struct{ name, role string }{
		{"a commit in progress", roleLockHolder},
		{"another cold start migrating", roleReservedHolder},
		{"a reader when the migration commits", roleReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "new.db")
			release := holdLockOf(t, tc.role, path)
			var opens atomic.Int64
			defer sqlite.SetOpenHook(func(stage, p string) {
				if stage == "open" && p == path {
					opens.Add(1)
				}
			})()
			s, err := sqlite.Open(context.Background(), storeConfig(path))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ready := make(chan error, 1)
			go func() { ready <- s.Ready(context.Background()) }()
			// The holder lets go after a moment, while the cold start
			// waits (or, before, tried again and again).
			time.Sleep(300 * time.Millisecond)
			release()
			if err := <-ready; err != nil {
				t.Fatalf("ready: %v", err)
			}
			if n := opens.Load(); n != 1 {
				t.Errorf("the file was opened %d times, want once", n)
			}
			if v := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, path), `PRAGMA user_version`); v != int64(sqlite.SchemaVersion()) {
				t.Errorf("schema version %d, want %d", v, sqlite.SchemaVersion())
			}
			if d := allow(t, s, ping, "k", t0); d.Count != 1 {
				t.Errorf("count %d, want 1", d.Count)
			}
		})
	}
}

// TestOpeningAMigratedFileWritesNothing: a cold start on a file that
// another has migrated (and recorded the layout of) reads the schema
// version and layout and takes no write lock: the file's change counter,
// which every committed write transaction increments, does not move.
func TestOpeningAMigratedFileWritesNothing(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rl.db")
			cfg := shardedConfig(path, shards)
			first := sqlitetest.Open(t, cfg)
			sqlitetest.OpenShards(t, first)
			first.Close()
			before := make([]uint32, shards)
			for i := range shards {
				before[i] = sqlitetest.ChangeCounter(t, sqlite.ShardPath(path, i))
			}
			s := sqlitetest.Open(t, cfg)
			sqlitetest.OpenShards(t, s)
			s.Close() // before reading the files, which would drop its locks
			for i := range shards {
				if after := sqlitetest.ChangeCounter(t, sqlite.ShardPath(path, i)); after != before[i] {
					t.Errorf("shard %d: change counter %d, then %d after a cold start: it wrote", i, before[i], after)
				}
			}
		})
	}
}

// TestAColdStartOnANewFileCommitsOnce: the process that creates a file
// migrates its schema and records its layout in one write transaction, so
// the others starting beside it wait for one commit, not two (each a
// journal written, synced and deleted: tens of milliseconds on EFS). The
// file's change counter, which each committed write transaction
// increments, reads 1. A cold start creates shard 0 alone; every other
// shard is created, in one commit too, by the first call that needs it.
func TestAColdStartOnANewFileCommitsOnce(t *testing.T) {
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rl.db")
			s := sqlitetest.Open(t, shardedConfig(path, shards))
			s.Close() // before reading the files, which would drop its locks
			if n := sqlitetest.ChangeCounter(t, path); n != 1 {
				t.Errorf("shard 0: change counter %d after one cold start on a new file, want 1 commit", n)
			}
			for i := 1; i < shards; i++ {
				if _, err := os.Stat(sqlite.ShardPath(path, i)); !os.IsNotExist(err) {
					t.Errorf("shard %d exists after a cold start (%v): it opens when a call first needs it", i, err)
				}
			}
			sqlitetest.OpenShards(t, s) // a read in each: creates the files, writes nothing more
			s.Close()
			for i := range shards {
				if n := sqlitetest.ChangeCounter(t, sqlite.ShardPath(path, i)); n != 1 {
					t.Errorf("shard %d: change counter %d once created, want 1 commit", i, n)
				}
			}
		})
	}
}
