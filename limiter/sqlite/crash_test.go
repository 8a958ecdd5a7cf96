package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/longtest"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/internal/testproc"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// Roles of this test binary, which doubles as the writer processes that the
// tests kill (see testproc).
const (
	// roleCrashingWriter stops in the middle of one big transaction.
	roleCrashingWriter = "crashing writer"
	// roleDecidingWorker makes decisions until killed.
	roleDecidingWorker = "deciding worker"
	// roleLockHolder holds the database's write lock until its stdin closes.
	roleLockHolder = "lock holder"
	// roleShardedWorker makes decisions on four shards, four at a time,
	// each under two policies, until killed.
	roleShardedWorker = "sharded worker"
)

func TestMain(m *testing.M) {
	testproc.Main(m, map[string]func(path string){
		roleCrashingWriter: crashingWriter,
		roleDecidingWorker: decidingWorker,
		roleLockHolder:     holdLock,
		roleShardedWorker:  shardedWorker,
		roleReservedHolder: holdWith(`BEGIN IMMEDIATE`, ""),
		roleReader:         holdWith(`BEGIN`, `SELECT count(*) FROM sqlite_schema`),
		roleHandoffHolder:  handoffHolder,
		roleHandoffWaiter:  handoffWaiter,
	})
}

// crashingWriter opens the database as the store does, starts a write
// transaction big enough to spill changed pages into the database file
// (which makes the journal hot), says so, and waits to be killed.
func crashingWriter(path string) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(DELETE)&_pragma=synchronous(FULL)&_pragma=cache_size(10)&_txlock=immediate")
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	tx, err := db.Begin()
	if err != nil {
		panic(err)
	}
	if _, err := tx.Exec(`UPDATE rate_limit_windows SET count = count + 1000`); err != nil {
		panic(err)
	}
	for i := range 2000 {
		if _, err := tx.Exec(`INSERT INTO api_calls (key, window_start, called_at, route, request_id) VALUES ('crash', '', '', '', ?)`, strings.Repeat("x", 200)+fmt.Sprint(i)); err != nil {
			panic(err)
		}
	}
	fmt.Println("spilled")
	select {}
}

// workerPolicy is what the deciding workers enforce.
var workerPolicy = limiter.Policy{Name: "ping", Limit: 40, Window: time.Minute}

// decidingWorker makes decisions over five keys on the database at path
// until it is killed (storetest.Work).
func decidingWorker(path string) {
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, BusyTimeout: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	storetest.Work(s, workerPolicy, 5, t0)
}

// everyAttempt is the second policy of the sharded workers: it counts
// every attempt and denies none, under another client key (key + "/all",
// as if from another key source), which mostly falls into another shard,
// so that most attempts are decided across two shards.
var everyAttempt = limiter.Policy{Name: "all", Limit: 1 << 40, Window: time.Minute, Namespace: "all"}

// shardedWorker decides over eight keys, under workerPolicy and
// everyAttempt, from four goroutines (so batches form), on four shards.
func shardedWorker(path string) {
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, Shards: 4, BusyTimeout: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	storetest.WorkConcurrently(s, []limiter.Policy{workerPolicy, everyAttempt}, 8, 4, t0)
}

// TestKillNineMidTransaction runs four processes making decisions on one
// file and, six times (three without -tags longtests, see longtest), kills
// one of them with SIGKILL at a random moment, most likely inside a
// transaction (that is where a decision spends its time), and starts
// another in its place. Afterwards the database passes
// integrity_check; no decision a process saw committed is missing; at most
// one more decision per kill is in the file (committed just before the kill,
// unreported); every window has exactly min(count, limit) audit rows; and
// the survivors kept deciding after every kill.
func TestKillNineMidTransaction(t *testing.T) {
	longtest.Parallel(t)
	path := filepath.Join(t.TempDir(), "shared.db")
	sqlitetest.Open(t, storeConfig(path)).Close() // create the schema first

	killed := storetest.Kill(t, storetest.Kills{Procs: 4, Kills: longtest.Rounds(t, 3, 6), Gap: 50, Timeout: 30 * time.Second}, func() *exec.Cmd {
		return testproc.Command(roleDecidingWorker, path)
	})

	// Open the file as the next environment would: a hot journal left by
	// the last kills is rolled back first.
	s := sqlitetest.Open(t, storeConfig(path))
	killed.Check(t, workerPolicy.Limit, storedWindows(t, s, workerPolicy))
}

// TestKillNineShardedAndBatched is TestKillNineMidTransaction on four
// shards, with four decisions in flight per process (so they batch) and
// every attempt under two policies (so most are decided across two
// shards). Afterwards every file passes integrity_check; every window has
// min(count, limit) audit rows and all reported decisions; and both
// policies counted every attempt of every key alike: no decision survived
// a kill counted in one shard only.
func TestKillNineShardedAndBatched(t *testing.T) {
	longtest.Parallel(t)
	path := filepath.Join(t.TempDir(), "shared.db")
	cfg := shardedConfig(path, 4)
	sqlitetest.Open(t, cfg).Close()
	killed := storetest.Kill(t, storetest.Kills{Procs: 4, Kills: longtest.Rounds(t, 3, 6), Gap: 50, Timeout: 30 * time.Second, InFlight: 4}, func() *exec.Cmd {
		return testproc.Command(roleShardedWorker, path)
	})
	s := sqlitetest.Open(t, cfg)
	stored := storedWindows(t, s, workerPolicy)
	killed.Check(t, workerPolicy.Limit, stored)
	all := storedWindows(t, s, everyAttempt)
	across := 0
	for k, w := range stored {
		other := k + "/" + everyAttempt.Name
		if all[other].Count != w.Count {
			t.Errorf("%s: counted %d under %s but %d under %s", k, w.Count, workerPolicy.Name, all[other].Count, everyAttempt.Name)
		}
		if sqlite.ShardOf(k, 4) != sqlite.ShardOf(other, 4) {
			across++
		}
	}
	if across == 0 || len(stored) != 8 {
		t.Errorf("%d of %d keys decided across shards; the test shows nothing across them", across, len(stored))
	}
}

// storedWindows checks integrity_check in every file of s and reads, per
// client key, p's counter and the audit rows of its window, from the
// shard of each. s opens every file first, as the next environments
// would once a request needs each: a hot journal a kill left is rolled
// back then, which the read-only connections here could not do.
func storedWindows(t *testing.T, s *sqlite.Store, p limiter.Policy) map[string]storetest.Window {
	t.Helper()
	sqlitetest.OpenShards(t, s)
	stored := map[string]storetest.Window{}
	for _, path := range s.Paths() {
		db := sqlitetest.Inspect(t, path)
		if r := sqlitetest.QueryString(t, db, `PRAGMA integrity_check`); r != "ok" {
			t.Fatalf("integrity_check of %s: %s", path, r)
		}
		rows, err := db.Query(`SELECT w.key, w.count, (SELECT count(*) FROM api_calls a WHERE p.client = a.key AND a.window_start = w.window_start)
		FROM rate_limit_windows w, (SELECT substr(w2.key, length(?1) + 1) AS client, w2.key AS key FROM rate_limit_windows w2) p
		WHERE p.key = w.key AND w.key = ?1 || p.client AND instr(p.client, char(31)) = 0`, decide.StoreKey(p, ""))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k string
			var w storetest.Window
			if err := rows.Scan(&k, &w.Count, &w.Audit); err != nil {
				t.Fatal(err)
			}
			stored[strings.TrimPrefix(k, decide.StoreKey(p, ""))] = w
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	return stored
}

// TestPruneUnderLoadFailsNoDecision prunes a backlog of 20,000 expired
// windows from one handle while two others make decisions as fast as they
// can: no decision fails, every count is exact, and the backlog is gone.
func TestPruneUnderLoadFailsNoDecision(t *testing.T) {
	longtest.Parallel(t)
	path := filepath.Join(t.TempDir(), "shared.db")
	pruner := sqlitetest.Open(t, storeConfig(path))
	if _, err := sqlitetest.Connect(t, path).Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 19999)
INSERT INTO rate_limit_windows (key, window_start, count, window_seconds) SELECT printf('old%05d', i), '2025-01-01T00:00:00Z', 1, 60 FROM n`); err != nil {
		t.Fatal(err)
	}
	deciders := []*sqlite.Store{sqlitetest.Open(t, storeConfig(path)), sqlitetest.Open(t, storeConfig(path))}
	done := make(chan struct{})
	var mu sync.Mutex
	attempts := map[string]int64{}
	var wg sync.WaitGroup
	for i := range 4 {
		s := deciders[i%2]
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				key := fmt.Sprintf("k%d", rand.IntN(4))
				if _, err := s.Allow(context.Background(), storetest.One(workerPolicy, key, t0, "", "")); err != nil {
					t.Errorf("decision failed while pruning: %v", err)
					return
				}
				mu.Lock()
				attempts[key]++
				mu.Unlock()
			}
		})
	}
	p, err := pruner.Prune(context.Background(), t0, time.Time{})
	close(done)
	wg.Wait()
	if err != nil || p.Windows != 20000 {
		t.Fatalf("prune = %+v, %v; want the 20,000 expired windows deleted", p, err)
	}
	db := sqlitetest.Inspect(t, path)
	var total int64
	for k, n := range attempts {
		total += n
		if got := sqlitetest.QueryInt(t, db, `SELECT count FROM rate_limit_windows WHERE key = ?`, k); got != n {
			t.Errorf("%s: stored %d, want %d", k, got, n)
		}
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM rate_limit_windows WHERE key LIKE 'old%'`); n != 0 {
		t.Errorf("%d expired windows left", n)
	}
	t.Logf("%d batches, the longest %v; %d decisions made meanwhile", pruner.Stats().Writes, pruner.Stats().LongestWrite, total)
}
