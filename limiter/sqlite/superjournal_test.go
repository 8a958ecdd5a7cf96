package sqlite_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/longtest"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/internal/testproc"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// superJournals lists the super-journals in dir: the files SQLite names
// after a transaction's main database, "-mj" and nine hex digits.
func superJournals(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*-mj[0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F][0-9A-F]9[0-9A-F][0-9A-F]"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// reporter runs a worker process and counts, by key, the decisions it
// reports committed, as storetest.Kill does, for a test that picks the
// moments of its kills itself.
type reporter struct {
	mu       sync.Mutex
	reported map[string]int64
	total    int
}

// start starts cmd and reads its reports until it dies; done is closed
// then.
func (r *reporter) start(t *testing.T, cmd *exec.Cmd) (done <-chan struct{}) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := make(chan struct{})
	go func() {
		defer close(c)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			r.mu.Lock()
			r.reported[sc.Text()]++
			r.total++
			r.mu.Unlock()
		}
	}()
	return c
}

func (r *reporter) progress() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// elsewhere is a policy the workers do not decide under, for keys they do
// not decide for.
var elsewhere = limiter.Policy{Name: "elsewhere", Limit: 1, Window: time.Minute, Namespace: "elsewhere"}

// TestPruneRemovesSuperJournalsLeftByKillNine kills a process that decides
// across four shards with SIGKILL in the middle of its cross-shard commits
// (when a super-journal appears, or up to 1.5 ms later), twelve times (six
// without -tags longtests, see longtest), and on until super-journals are
// left behind: SQLite deletes one when the last journal
// that names it is rolled back, and never one that no journal names yet
// (a kill after the super-journal is made and before the first journal
// names it). Prune removes them, and the counts stay exact: every file
// passes integrity_check, every reported decision is stored, and both
// policies counted every key alike.
func TestPruneRemovesSuperJournalsLeftByKillNine(t *testing.T) {
	longtest.Parallel(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "rl.db")
	cfg := shardedConfig(path, 4)
	sqlitetest.Open(t, cfg).Close()

	r := &reporter{reported: map[string]int64{}}
	kills, rounds := 0, longtest.Rounds(t, 6, 12)
	var s *sqlite.Store
	var pending []string
	// Kill rounds until a kill leaves a super-journal that the next open
	// does not clear: SQLite deletes one itself when it rolls back the
	// last hot journal that names it, so only some of those a kill
	// leaves are prune's to remove.
	for len(pending) == 0 {
		if kills >= 400 {
			t.Fatalf("%d kills left no super-journal past the next open: the test shows nothing", kills)
		}
		if s != nil {
			s.Close()
		}
		kills = killMidCommit(t, r, path, dir, kills, rounds)
		left := superJournals(t, dir)
		t.Logf("%d kills mid-commit left %d super-journals: %v", kills, len(left), left)
		// Open the files as the next environment would, decide in each (a
		// journal a kill left that is not hot, and may name a
		// super-journal, stays until the file's next commit deletes it).
		s = sqlitetest.Open(t, cfg)
		for i, decided := 0, map[int]bool{}; len(decided) < cfg.Shards; i++ {
			if key := fmt.Sprint("other", kills, "-", i); !decided[sqlite.ShardOf(key, cfg.Shards)] {
				allow(t, s, elsewhere, key, t0)
				decided[sqlite.ShardOf(key, cfg.Shards)] = true
			}
		}
		pending = superJournals(t, dir)
		rounds = kills + 1 // from now on, one kill more at a time
	}

	p, err := s.Prune(context.Background(), t0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if rest := superJournals(t, dir); len(rest) != 0 {
		t.Errorf("after prune (%+v), super-journals remain: %v", p, rest)
	}
	if p.SuperJournals != int64(len(pending)) {
		t.Errorf("prune reports %d super-journals deleted, want the %d the open left: %v", p.SuperJournals, len(pending), pending)
	}
	for _, f := range pending {
		if _, err := os.Stat(f); err == nil {
			t.Errorf("%s is still there", f)
		}
	}

	killed := storetest.Killed{Plan: storetest.Kills{Procs: 1, Kills: kills - 1, InFlight: 4}, Reported: r.reported, Total: r.total}
	checkKilled(t, s, killed)
}

// killMidCommit runs the sharded worker on path and kills it in the middle
// of a cross-shard commit, again and again, from kill number kills until
// it has been killed rounds times and at least one super-journal is left
// in dir (up to 200 kills), and returns how many kills there have been.
func killMidCommit(t *testing.T, r *reporter, path, dir string, kills, rounds int) int {
	t.Helper()
	for ; kills < rounds || kills < 200 && len(superJournals(t, dir)) == 0; kills++ {
		before := superJournals(t, dir)
		cmd := testproc.Command(roleShardedWorker, path)
		done := r.start(t, cmd)
		// Let it decide for a while, then kill it the moment a
		// super-journal of its own appears.
		deadline := time.Now().Add(30 * time.Second)
		for from := r.progress(); r.progress() < from+20; {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("kill %d: no progress in 30 s", kills)
			}
			time.Sleep(time.Millisecond)
		}
		for {
			if m := superJournals(t, dir); len(m) > len(before) || !slices.Equal(m, before) {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("no cross-shard commit seen in 30 s")
			}
		}
		// At once, or a little later: in the middle of the commit's
		// syncs, when the journals may already name the super-journal.
		time.Sleep(time.Duration(rand.IntN(4)) * 500 * time.Microsecond)
		cmd.Process.Kill()
		<-done // the reports it made, to the last
		cmd.Wait()
	}
	return kills
}

// checkKilled checks the sharded workers' counts after their kills, in s:
// exact for what they reported (killed), and alike under both policies
// they decide under, which every cross-shard commit writes together.
func checkKilled(t *testing.T, s *sqlite.Store, killed storetest.Killed) {
	t.Helper()
	stored := storedWindows(t, s, workerPolicy)
	killed.Check(t, workerPolicy.Limit, stored)
	all := storedWindows(t, s, everyAttempt)
	for k, w := range stored {
		if other := k + "/" + everyAttempt.Name; all[other].Count != w.Count {
			t.Errorf("%s: counted %d under %s but %d under %s", k, w.Count, workerPolicy.Name, all[other].Count, everyAttempt.Name)
		}
	}
}

// namingJournal is a journal that names the super-journal at sj, as SQLite
// ends one (writeSuperJournal in pager.c), after a header of zeros: a
// journal that is not hot, which SQLite neither rolls back nor deletes,
// but which still keeps the super-journal it names.
func namingJournal(sj string) []byte {
	b := make([]byte, 512, 512+4+len(sj)+16)
	b = binary.BigEndian.AppendUint32(b, 0x40000000/4096+1) // PAGER_SJ_PGNO
	b = append(b, sj...)
	var sum uint32
	for _, c := range []byte(sj) {
		sum += uint32(int8(c))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(sj)))
	b = binary.BigEndian.AppendUint32(b, sum)
	return append(b, 0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7)
}

// TestPruneRemovesOnlySuperJournalsNoJournalNames lays super-journals
// beside four shards by hand, as crashed commits leave them, and prunes:
// those no journal names go (one listing two shards, one listing nothing
// yet); the one a shard's journal names stays, as do one that lists a file
// outside the store and one named after another database.
func TestPruneRemovesOnlySuperJournalsNoJournalNames(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "rl.db")
	s := sqlitetest.Open(t, shardedConfig(path, 4))
	sqlitetest.OpenShards(t, s) // the files a crash mid-commit leaves journals beside
	shard := func(i int) string { return sqlite.ShardPath(path, i) }
	list := func(names ...string) []byte { return []byte(strings.Join(names, "\x00") + "\x00") }
	files := []struct {
		path string
		body []byte
		kept bool
	}{
		{shard(0) + "-mj0A1B2C9D3", list(shard(0)+"-journal", shard(1)+"-journal"), false},
		{shard(3) + "-mj4E5F609A1", nil, false},
		{shard(1) + "-mj1234569AB", list(shard(1)+"-journal", shard(2)+"-journal"), true},
		{shard(2) + "-journal", namingJournal(shard(1) + "-mj1234569AB"), true},
		{shard(0) + "-mj7777779CC", list(shard(0)+"-journal", filepath.Join(t.TempDir(), "other.db-journal")), true},
		{filepath.Join(dir, "other.db-mj8888889DD"), list(filepath.Join(dir, "other.db-journal")), true},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p, err := s.Prune(context.Background(), t0, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, err := os.Stat(f.path); (err == nil) != f.kept {
			t.Errorf("%s: kept %v, want %v", filepath.Base(f.path), err == nil, f.kept)
		}
	}
	if p.SuperJournals != 2 {
		t.Errorf("prune reports %d super-journals deleted, want 2", p.SuperJournals)
	}
}

// TestPruneDuringCrossShardCommitsRemovesNoLiveSuperJournal prunes, over
// and over, while two processes decide across four shards. A super-journal
// lives from its commit's start to its end; deleting one in between would
// fail that commit (or, after a crash, commit it half written). No
// decision fails, every count is exact, and both policies counted every
// key alike.
func TestPruneDuringCrossShardCommitsRemovesNoLiveSuperJournal(t *testing.T) {
	longtest.Parallel(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "rl.db")
	cfg := shardedConfig(path, 4)
	pruner := sqlitetest.Open(t, cfg)
	r := &reporter{reported: map[string]int64{}}
	var cmds []*exec.Cmd
	var dones []<-chan struct{}
	for range 2 {
		cmd := testproc.Command(roleShardedWorker, path)
		dones = append(dones, r.start(t, cmd))
		cmds = append(cmds, cmd)
	}
	seen := 0
	for i := 0; seen < 5 && i < 2000; i++ {
		if len(superJournals(t, dir)) > 0 {
			seen++
		}
		if _, err := pruner.Prune(context.Background(), t0, time.Time{}); err != nil {
			t.Errorf("prune: %v", err)
			break
		}
	}
	for i, cmd := range cmds {
		// A worker that exits by itself failed a decision.
		cmd.Process.Kill()
		<-dones[i]
		if err := cmd.Wait(); !strings.Contains(fmt.Sprint(err), "killed") {
			t.Errorf("worker %d: %v, want it killed", i, err)
		}
	}
	t.Logf("%d decisions; a super-journal seen before %d of the prunes", r.total, seen)
	if seen == 0 {
		t.Fatal("no prune ran beside a cross-shard commit: the test shows nothing")
	}
	s := sqlitetest.Open(t, cfg)
	killed := storetest.Killed{Plan: storetest.Kills{Procs: 2, InFlight: 4}, Reported: r.reported, Total: r.total}
	checkKilled(t, s, killed)
}
