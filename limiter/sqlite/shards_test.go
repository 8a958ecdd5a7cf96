package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/internal/testproc"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// keyIn is the first key "k0", "k1", ... whose counters live in shard i of
// n.
func keyIn(t *testing.T, i, n int) string {
	t.Helper()
	for j := range 10000 {
		if k := fmt.Sprint("k", j); sqlite.ShardOf(k, n) == i {
			return k
		}
	}
	t.Fatalf("no key in shard %d of %d", i, n)
	return ""
}

// TestShardsSpreadKeysAndRecordTheLayout: four files, each key's counter
// in the one its client key hashes to, every file recording its place.
func TestShardsSpreadKeysAndRecordTheLayout(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, shardedConfig("", 4))
	paths := s.Paths()
	if paths[0] != s.Path() || paths[3] != s.Path()+".shard-3" {
		t.Fatalf("paths %v", paths)
	}
	for i := range 4 {
		allow(t, s, ping, keyIn(t, i, 4), t0)
	}
	for i, p := range paths {
		db := sqlitetest.Inspect(t, p)
		if got := sqlitetest.QueryString(t, db, `SELECT shard || ' of ' || shards FROM layout`); got != fmt.Sprint(i, " of 4") {
			t.Errorf("%s records %q, want %d of 4", p, got, i)
		}
		if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM rate_limit_windows WHERE key = ?`, keyIn(t, i, 4)); n != 1 {
			t.Errorf("shard %d: %d rows for its key, want 1", i, n)
		}
		if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM rate_limit_windows`); n != 1 {
			t.Errorf("shard %d holds %d counters, want its own key's only", i, n)
		}
	}
}

// TestOneShardIsTodaysFile: with one shard the store is the one file at
// the path, and nothing beside it.
func TestOneShardIsTodaysFile(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, storeConfig(""))
	allow(t, s, ping, "k", t0)
	entries, err := os.ReadDir(filepath.Dir(s.Path()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "ratelimit.db ratelimit.db-wait" {
		t.Errorf("files %v, want the database and its waiting room", names)
	}
}

// TestAnotherShardCountIsRefused: files made with four shards are refused
// by a process configured for two or one, naming the files and both
// counts, as a fault that will not clear; nothing is counted meanwhile.
func TestAnotherShardCountIsRefused(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	allow(t, sqlitetest.Open(t, shardedConfig(path, 4)), ping, "k", t0)
	for _, n := range []int{1, 2, 8} {
		s, err := sqlite.Open(context.Background(), shardedConfig(path, n))
		if err != nil {
			t.Fatal(err)
		}
		err = s.Ready(context.Background())
		if fault.Of(err) != fault.Schema || errors.Is(err, limiter.ErrUnavailable) ||
			!strings.Contains(err.Error(), "shard 0 of 4 (ratelimit.db, ratelimit.db.shard-1 … ratelimit.db.shard-3)") ||
			!strings.Contains(err.Error(), fmt.Sprint("SQLITE_SHARDS=", n)) {
			t.Errorf("%d shards on a 4-shard layout: %v; want a schema fault naming the files and both counts", n, err)
		}
		if _, err := s.Allow(context.Background(), storetest.One(ping, keyIn(t, n-1, n), t0, "", "")); fault.Of(err) != fault.Schema {
			t.Errorf("%d shards: allow = %v, want the schema fault", n, err)
		}
		s.Close()
	}
	if _, err := os.Stat(sqlite.ShardPath(path, 4)); !os.IsNotExist(err) {
		t.Errorf("a refused process created %s", sqlite.ShardPath(path, 4))
	}
}

// TestASingleFileDatabaseIsNotSpreadOver: a database from before shards
// (schema 2, no layout) that holds counters is refused by a process
// configured for four, and taken as the only shard by one configured for
// one.
func TestASingleFileDatabaseIsNotSpreadOver(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	allow(t, sqlitetest.Open(t, storeConfig(path)), ping, "k", t0)
	if _, err := sqlitetest.Connect(t, path).Exec(`DROP TABLE layout; PRAGMA user_version = 2`); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(context.Background(), shardedConfig(path, 4))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ready(context.Background()); fault.Of(err) != fault.Schema || !strings.Contains(err.Error(), "single-file database") {
		t.Errorf("4 shards on a single-file database: %v; want a schema fault saying so", err)
	}
	if _, err := os.Stat(sqlite.ShardPath(path, 1)); !os.IsNotExist(err) {
		t.Errorf("a refused process created shard 1")
	}
	if d := allow(t, sqlitetest.Open(t, storeConfig(path)), ping, "k", t0); d.Count != 2 {
		t.Errorf("one shard on it: count %d, want 2", d.Count)
	}
	if got := sqlitetest.QueryString(t, sqlitetest.Inspect(t, path), `SELECT shard || ' of ' || shards FROM layout`); got != "0 of 1" {
		t.Errorf("layout %q, want 0 of 1", got)
	}
}

// TestOneKeysPoliciesShareAShard: a request under three policies of one
// client key is decided in that key's shard alone, in one file's
// transaction.
func TestOneKeysPoliciesShareAShard(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, shardedConfig("", 4))
	burst := limiter.Policy{Name: "burst", Limit: 5, Window: time.Second, Algorithm: limiter.Sliding, Namespace: "burst"}
	daily := limiter.Policy{Name: "daily", Limit: 1000, Window: 24 * time.Hour, Namespace: "daily"}
	key := keyIn(t, 2, 4)
	a := limiter.Attempt{Charges: []limiter.Charge{{Policy: ping, Key: key}, {Policy: burst, Key: key}, {Policy: daily, Key: key}}, Now: t0}
	if o, err := s.Allow(context.Background(), a); err != nil || !o.Allowed {
		t.Fatalf("allow = %+v, %v", o, err)
	}
	if st := s.Stats(); st.CrossShard != 0 || st.Batches != 1 {
		t.Errorf("stats %+v; want one batch, nothing across shards", st)
	}
	if n := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, s.Paths()[2]), `SELECT count(*) FROM rate_limit_windows`); n != 3 {
		t.Errorf("shard 2 holds %d counters, want the key's three", n)
	}
}

// TestARequestAcrossShardsCommitsInEveryOneOrNone: a request counted in
// two shards (under policies of two client keys) whose commit fails leaves
// neither counted; the next one counts in both, its audit row in the first
// check's shard.
func TestARequestAcrossShardsCommitsInEveryOneOrNone(t *testing.T) {
	// Not t.Parallel: it sets the package-wide commit hook.
	s := sqlitetest.Open(t, shardedConfig("", 4))
	sqlitetest.OpenShards(t, s) // every file is read below
	byIP := limiter.Policy{Name: "ip", Limit: 1000, Window: time.Minute, Namespace: "ip"}
	key, ip := keyIn(t, 1, 4), keyIn(t, 3, 4)
	a := limiter.Attempt{Charges: []limiter.Charge{{Policy: ping, Key: key}, {Policy: byIP, Key: ip}}, Now: t0, Route: "GET /ping", RequestID: "r"}
	restore := sqlite.SetCommitHook(func(string) error { return errors.New("forced failure") })
	if _, err := s.Allow(context.Background(), a); err == nil || !strings.Contains(err.Error(), "decide across") {
		t.Fatalf("allow with its commit failing = %v; want the error, naming the files", err)
	}
	restore()
	count := func(p limiter.Policy, k string) int64 {
		db := sqlitetest.Inspect(t, s.Paths()[sqlite.ShardOf(k, 4)])
		return sqlitetest.QueryInt(t, db, `SELECT coalesce(sum(count), 0) FROM rate_limit_windows WHERE key = ?`, decide.StoreKey(p, k))
	}
	if count(ping, key) != 0 || count(byIP, ip) != 0 {
		t.Fatalf("after the failed commit: counted %d and %d, want nothing in either shard", count(ping, key), count(byIP, ip))
	}
	o, err := s.Allow(context.Background(), a)
	if err != nil || !o.Allowed || o.Decisions[0].Count != 1 || o.Decisions[1].Count != 1 {
		t.Fatalf("allow = %+v, %v; want allowed, count 1 under both", o, err)
	}
	if count(ping, key) != 1 || count(byIP, ip) != 1 {
		t.Errorf("counted %d and %d, want 1 in each shard", count(ping, key), count(byIP, ip))
	}
	for i, path := range s.Paths() {
		want := int64(0)
		if i == 1 {
			want = 1
		}
		if n := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, path), `SELECT count(*) FROM api_calls`); n != want {
			t.Errorf("shard %d: %d audit rows, want %d", i, n, want)
		}
	}
	if st := s.Stats(); st.CrossShard != 1 {
		t.Errorf("stats %+v, want one cross-shard decision", st)
	}
}

// TestReadOnlyShards: a read-only store reads every shard a writer
// counted in, and a shard file no writer made yet as zeros.
func TestReadOnlyShards(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	w := sqlitetest.Open(t, shardedConfig(path, 4))
	k1, k2 := keyIn(t, 1, 4), keyIn(t, 2, 4)
	allow(t, w, ping, k1, t0)
	allow(t, w, ping, k1, t0)
	w.Close()
	if _, err := os.Stat(sqlite.ShardPath(path, 2)); !os.IsNotExist(err) {
		t.Fatalf("shard 2, which no call of the writer needed, exists (%v): shards open when first needed", err)
	}
	cfg := shardedConfig(path, 4)
	cfg.ReadOnly = true
	r, err := sqlite.Open(context.Background(), cfg) // not Ready: shard 2 is missing, as for one file
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if u, err := r.Usage(context.Background(), ping, k1, t0); err != nil || u.Count != 2 {
		t.Errorf("usage in shard 1 = %+v, %v; want count 2", u, err)
	}
	if u, err := r.Usage(context.Background(), ping, k2, t0); err != nil || u.Count != 0 {
		t.Errorf("usage in a shard not yet made = %+v, %v; want count 0", u, err)
	}
	if _, err := os.Stat(sqlite.ShardPath(path, 2)); !os.IsNotExist(err) {
		t.Errorf("the read-only store created shard 2")
	}
}

// TestAHotJournalInOneShardHoldsUpNoOther: a writer killed inside a
// transaction on shard 1 leaves its journal hot. A reader cannot read
// shard 1 until a writer rolls it back, but reads and decisions in the
// other shards go on meanwhile.
func TestAHotJournalInOneShardHoldsUpNoOther(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	w := sqlitetest.Open(t, shardedConfig(path, 4))
	k1, k2 := keyIn(t, 1, 4), keyIn(t, 2, 4)
	allow(t, w, ping, k1, t0)
	allow(t, w, ping, k2, t0)
	w.Close()
	child := testproc.Command(roleCrashingWriter, sqlite.ShardPath(path, 1))
	out, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "spilled\n" {
		child.Process.Kill()
		t.Fatalf("writer said %q", line)
	}
	child.Process.Kill()
	child.Wait()

	cfg := shardedConfig(path, 4)
	cfg.ReadOnly = true
	r, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Usage(context.Background(), ping, k1, t0); !errors.Is(err, limiter.ErrUnavailable) {
		t.Errorf("read of the shard with a hot journal = %v, want unavailable", err)
	}
	if u, err := r.Usage(context.Background(), ping, k2, t0); err != nil || u.Count != 1 {
		t.Errorf("read of another shard = %+v, %v; want count 1", u, err)
	}
	w = sqlitetest.Open(t, shardedConfig(path, 4)) // rolls shard 1 back
	if d := allow(t, w, ping, k1, t0); d.Count != 2 {
		t.Errorf("count in shard 1 after recovery = %d, want 2", d.Count)
	}
	if u, err := r.Usage(context.Background(), ping, k1, t0); err != nil || u.Count != 2 {
		t.Errorf("read after recovery = %+v, %v; want 2", u, err)
	}
}

// TestShardsSpreadKeysEvenly: 1,000 keys of the loadtest's shape over 16
// shards land 62.5 to a shard on average; none gets fewer than half or
// more than twice that. (The hash is fixed, so this cannot flake.)
func TestShardsSpreadKeysEvenly(t *testing.T) {
	t.Parallel()
	for _, n := range []int{4, 16, 32} {
		per := make([]int, n)
		for i := range 1000 {
			per[sqlite.ShardOf(fmt.Sprintf("k%04d", i), n)]++
		}
		mean := 1000 / float64(n)
		for i, c := range per {
			if float64(c) < mean/2 || float64(c) > 2*mean {
				t.Errorf("%d shards: shard %d has %d of 1,000 keys, mean %.1f", n, i, c, mean)
			}
		}
	}
}

// TestPruneGoesOnPastAShardItCannotOpen: a shard whose file another shard's
// copy has replaced (or that is corrupt) is met at its first use, not at
// Ready, so a process with it starts and serves the other shards; its
// prune, which reports that shard's fault, still deletes the other
// shards' expired counters, rather than stop at the first shard it cannot
// open, run after run.
func TestPruneGoesOnPastAShardItCannotOpen(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	w := sqlitetest.Open(t, shardedConfig(path, 4))
	for i := range 4 {
		allow(t, w, ping, keyIn(t, i, 4), t0)
	}
	w.Close()
	copied, err := os.ReadFile(sqlite.ShardPath(path, 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sqlite.ShardPath(path, 1), copied, 0o644); err != nil {
		t.Fatal(err)
	}
	s := sqlitetest.Open(t, shardedConfig(path, 4)) // Ready: shard 0 alone
	if d := allow(t, s, ping, keyIn(t, 2, 4), t0.Add(time.Hour)); d.Count != 1 {
		t.Fatalf("shard 2 serves: count %d, want 1", d.Count)
	}
	p, err := s.Prune(context.Background(), t0.Add(time.Hour), time.Time{})
	if fault.Of(err) != fault.Schema || !strings.Contains(err.Error(), "shard-1") {
		t.Errorf("prune = %+v, %v; want shard 1's schema fault", p, err)
	}
	for _, i := range []int{0, 2, 3} {
		db := sqlitetest.Inspect(t, sqlite.ShardPath(path, i))
		if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM rate_limit_windows WHERE window_start < ?`, decide.FormatWindow(t0.Add(time.Minute))); n != 0 {
			t.Errorf("shard %d: %d expired counters left after prune (%+v)", i, n, p)
		}
	}
	if p.Windows != 3 {
		t.Errorf("prune deleted %d counters, want the 3 expired ones of shards 0, 2 and 3", p.Windows)
	}
}

// TestPruneMakesNoShardFileNoCallMade: a shard whose file no call has
// made holds nothing to prune, so Prune leaves it unmade, as the calls
// that did not need it did: the prune function's first run on a new
// deployment does not create and migrate every file (64 of them took 9 s
// on the EFS model), and the local server's prune loop none.
func TestPruneMakesNoShardFileNoCallMade(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	s := sqlitetest.Open(t, shardedConfig(path, 4))
	k1 := keyIn(t, 1, 4)
	allow(t, s, ping, k1, t0)
	p, err := s.Prune(context.Background(), t0.Add(time.Hour), time.Time{})
	if err != nil || p.Windows != 1 {
		t.Fatalf("prune = %+v, %v; want the one expired counter deleted", p, err)
	}
	for _, i := range []int{2, 3} {
		if _, err := os.Stat(sqlite.ShardPath(path, i)); !os.IsNotExist(err) {
			t.Errorf("shard %d, which no call made, exists after a prune (%v)", i, err)
		}
	}
}

// TestAShardFileAtAnotherShardsPathIsNamedSo: a shard's file copied or
// renamed to another shard's path, under the same count, is refused with
// what is wrong, the file at the wrong path, and not with advice to change
// SQLITE_SHARDS to the count the process already runs with.
func TestAShardFileAtAnotherShardsPathIsNamedSo(t *testing.T) {
	t.Parallel()
	path := sqlitetest.Path(t)
	s := sqlitetest.Open(t, shardedConfig(path, 4))
	sqlitetest.OpenShards(t, s)
	s.Close()
	if err := os.Rename(sqlite.ShardPath(path, 3), sqlite.ShardPath(path, 1)); err != nil {
		t.Fatal(err)
	}
	s = sqlitetest.Open(t, shardedConfig(path, 4))
	_, err := s.Allow(context.Background(), storetest.One(ping, keyIn(t, 1, 4), t0, "", ""))
	if fault.Of(err) != fault.Schema || strings.Contains(fmt.Sprint(err), "start it with SQLITE_SHARDS") ||
		!strings.Contains(fmt.Sprint(err), "ratelimit.db.shard-1 holds shard 3 of 4") {
		t.Errorf("shard 3's file at shard 1's path: %v; want a schema fault saying the file is at another shard's path", err)
	}
}
