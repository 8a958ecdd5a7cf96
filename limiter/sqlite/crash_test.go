package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// TestMain lets the test binary double as the writer processes that the
// tests kill: RATELIMIT_CRASHING_WRITER stops in the middle of one big
// transaction, RATELIMIT_DECIDING_WORKER makes decisions until killed.
func TestMain(m *testing.M) {
	if path := os.Getenv("RATELIMIT_CRASHING_WRITER"); path != "" {
		crashingWriter(path)
		return
	}
	if path := os.Getenv("RATELIMIT_DECIDING_WORKER"); path != "" {
		decidingWorker(path)
		return
	}
	os.Exit(m.Run())
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

// decidingWorker makes decisions over five keys as fast as it can, and
// reports each one that Allow returned (so committed) on stdout.
func decidingWorker(path string) {
	s, err := sqlite.Open(context.Background(), limiter.StoreConfig{Path: path, BusyTimeout: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	out := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		key := fmt.Sprintf("k%d", rand.IntN(5))
		if _, err := s.Allow(context.Background(), limiter.One(workerPolicy, key, t0, "GET /ping", "w")); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		fmt.Fprintln(out, key)
		out.Flush()
	}
}

// TestKillNineMidTransaction runs four processes making decisions on one
// file and, six times, kills one of them with SIGKILL at a random moment,
// most likely inside a transaction (that is where a decision spends its
// time), and starts another in its place. Afterwards the database passes
// integrity_check; no decision a process saw committed is missing; at most
// one more decision per kill is in the file (committed just before the kill,
// unreported); every window has exactly min(count, limit) audit rows; and
// the survivors kept deciding after every kill.
func TestKillNineMidTransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	mustOpenAt(t, path).Close() // create the schema first

	var mu sync.Mutex
	reported := map[string]int64{}
	total := 0
	var wg sync.WaitGroup
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "RATELIMIT_DECIDING_WORKER="+path)
		cmd.Stderr = os.Stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				mu.Lock()
				reported[sc.Text()]++
				total++
				mu.Unlock()
			}
		})
		return cmd
	}
	progress := func() int {
		mu.Lock()
		defer mu.Unlock()
		return total
	}
	waitForProgress := func(n int) {
		deadline := time.Now().Add(30 * time.Second)
		for before := progress(); progress() < before+n; {
			if time.Now().After(deadline) {
				t.Fatalf("no progress: %d decisions reported", progress())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	procs := make([]*exec.Cmd, 4)
	for i := range procs {
		procs[i] = start()
	}
	const kills = 6
	for range kills {
		waitForProgress(50 + rand.IntN(100))
		i := rand.IntN(len(procs))
		procs[i].Process.Kill()
		procs[i].Wait()
		procs[i] = start()
		waitForProgress(50) // the others, and the newcomer, carry on
	}
	for _, p := range procs {
		p.Process.Kill()
		p.Wait()
	}
	wg.Wait()

	// Open the file as the next environment would: a hot journal left by
	// the last kills is rolled back first.
	mustOpenAt(t, path)
	db := inspect(t, path)
	if r := queryString(t, db, `PRAGMA integrity_check`); r != "ok" {
		t.Fatalf("integrity_check: %s", r)
	}
	stored := map[string]int64{}
	rows, _ := db.Query(`SELECT w.key, w.count, (SELECT count(*) FROM api_calls a WHERE a.key = w.key AND a.window_start = w.window_start)
		FROM rate_limit_windows w`)
	for rows.Next() {
		var k string
		var n, audit int64
		rows.Scan(&k, &n, &audit)
		stored[k] = n
		if audit != min(n, workerPolicy.Limit) {
			t.Errorf("%s: count %d with %d audit rows, want %d", k, n, audit, min(n, workerPolicy.Limit))
		}
	}
	rows.Close()
	var extra int64
	for k, n := range reported {
		if stored[k] < n {
			t.Errorf("%s: %d decisions reported committed, only %d stored: a committed decision was lost", k, n, stored[k])
		}
		extra += stored[k] - n
	}
	t.Logf("%d decisions reported, %d more committed by processes killed before they could report them", progress(), extra)
	// The kill at the very end counts too.
	if extra > kills+int64(len(procs)) {
		t.Errorf("%d stored decisions nobody reported, more than one per killed process", extra)
	}
}

// TestPruneUnderLoadFailsNoDecision prunes a backlog of 20,000 expired
// windows from one handle while two others make decisions as fast as they
// can: no decision fails, every count is exact, and the backlog is gone.
func TestPruneUnderLoadFailsNoDecision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	pruner := mustOpenAt(t, path)
	if _, err := inspect(t, path).Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 19999)
INSERT INTO rate_limit_windows (key, window_start, count, window_seconds) SELECT printf('old%05d', i), '2025-01-01T00:00:00Z', 1, 60 FROM n`); err != nil {
		t.Fatal(err)
	}
	deciders := []*sqlite.Store{mustOpenAt(t, path), mustOpenAt(t, path)}
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
				if _, err := s.Allow(context.Background(), limiter.One(workerPolicy, key, t0, "", "")); err != nil {
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
	db := inspect(t, path)
	var total int64
	for k, n := range attempts {
		total += n
		if got := queryInt(t, db, `SELECT count FROM rate_limit_windows WHERE key = ?`, k); got != n {
			t.Errorf("%s: stored %d, want %d", k, got, n)
		}
	}
	if n := queryInt(t, db, `SELECT count(*) FROM rate_limit_windows WHERE key LIKE 'old%'`); n != 0 {
		t.Errorf("%d expired windows left", n)
	}
	t.Logf("%d batches, the longest %v; %d decisions made meanwhile", pruner.Stats().Writes, pruner.Stats().LongestWrite, total)
}
