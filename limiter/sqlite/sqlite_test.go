package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/sqlitetune"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/memory"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// t0 is 2026-01-01T00:00:00Z, the start of a window of any length that
// divides a day.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var ping = limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}

func storeConfig(path string) sqlite.Config {
	return sqlite.Config{Path: path, JournalMode: "DELETE", BusyTimeout: 5 * time.Second}
}

func allow(tb testing.TB, s *sqlite.Store, p limiter.Policy, key string, now time.Time) limiter.Decision {
	tb.Helper()
	o, err := s.Allow(context.Background(), storetest.One(p, key, now, "GET /ping", "req"))
	if err != nil {
		tb.Fatalf("allow %q at %v: %v", key, now, err)
	}
	return o.Decisions[0]
}

func TestPruneDeletesLargeBacklogsInBatches(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, storeConfig(""))
	db := sqlitetest.Connect(t, s.Path())
	// 2,500 expired windows and 2,500 audit rows, interleaved in key order
	// with 500 live ones, written directly for speed.
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3000 {
		start := "2026-01-01T00:00:00Z" // expired at now
		if i%6 == 0 {
			start = "2026-01-01T01:00:00Z" // live at now
		}
		if _, err := tx.Exec(`INSERT INTO rate_limit_windows VALUES (printf('k%05d', ?1), ?2, 1, 60)`, i, start); err != nil {
			t.Fatal(err)
		}
		calledAt := "2026-01-01T00:00:00.000Z"
		if i >= 2500 {
			calledAt = "2026-01-01T01:00:00.000Z"
		}
		if _, err := tx.Exec(`INSERT INTO api_calls (key, window_start, called_at, route, request_id) VALUES ('k', ?1, ?2, 'GET /ping', 'r')`, start, calledAt); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	now := t0.Add(time.Hour + 30*time.Second)
	got, err := s.Prune(context.Background(), now, t0.Add(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got.Windows != 2500 || got.Audit != 2500 {
		t.Errorf("pruned %+v, want 2500 windows and 2500 audit rows", got)
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM rate_limit_windows WHERE window_start = '2026-01-01T01:00:00Z'`); n != 500 {
		t.Errorf("live windows left = %d, want 500", n)
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls WHERE called_at >= '2026-01-01T00:30:00.000Z'`); n != 500 {
		t.Errorf("young audit rows left = %d, want 500", n)
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls`); n != 500 {
		t.Errorf("audit rows left = %d, want 500", n)
	}
}

func TestPruneAuditKeepsYoungRowsOutOfOrder(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, storeConfig(""))
	// Two hosts whose clocks differ: a young row committed before an old one.
	for _, at := range []time.Duration{-2 * time.Hour, time.Minute, -time.Hour} {
		allow(t, s, ping, "k", t0.Add(at))
	}
	got, err := s.Prune(context.Background(), t0.Add(2*time.Minute), t0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Audit != 1 {
		t.Errorf("pruned %d audit rows, want 1: only the prefix before the first young row", got.Audit)
	}
	db := sqlitetest.Inspect(t, s.Path())
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls WHERE called_at >= '2026-01-01T00:00:00.000Z'`); n != 1 {
		t.Errorf("young rows left = %d, want 1", n)
	}
}

func TestMigrationsAreVersionedAndSurviveRacingColdStarts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "race.db")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			s, err := sqlite.Open(context.Background(), storeConfig(path))
			if err == nil {
				// Ready is a cold start's first touch of the file.
				if err = s.Ready(context.Background()); err == nil {
					_, err = s.Allow(context.Background(), storetest.One(ping, "k", t0, "", ""))
				}
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("racing open: %v", err)
		}
	}
	db := sqlitetest.Inspect(t, path)
	if v := sqlitetest.QueryInt(t, db, `PRAGMA user_version`); v != int64(sqlite.SchemaVersion()) {
		t.Errorf("user_version = %d, want %d", v, sqlite.SchemaVersion())
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT count FROM rate_limit_windows`); n != 8 {
		t.Errorf("count = %d, want 8", n)
	}
	// The note's redundant index is not created; the counter table is its
	// own primary-key b-tree.
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM sqlite_schema WHERE type = 'index'`); n != 0 {
		t.Errorf("%d indexes, want none", n)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "newer.db")
	sqlitetest.Open(t, storeConfig(path)).Close()
	if _, err := sqlitetest.Connect(t, path).Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(context.Background(), storeConfig(path))
	if err != nil {
		t.Fatalf("open = %v; want a store, which opens the file when Ready", err)
	}
	defer s.Close()
	err = s.Ready(context.Background())
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") || errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("ready with a newer schema: %v; want a fatal error saying so", err)
	}
	if f := fault.Of(err); f != fault.Schema {
		t.Errorf("fault %q, want %q", f, fault.Schema)
	}
}

func TestOpenNeverRunsInWALLeftByAnotherProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "wal.db")
	// Another process keeps the file open in WAL mode, so SQLite cannot
	// switch it to the rollback journal: opening must say so, not carry on
	// in WAL, and succeed in the mode asked for once the file is free.
	other := sqlitetest.Connect(t, path)
	other.SetMaxOpenConns(1)
	if _, err := other.Exec(`PRAGMA journal_mode = WAL; CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	cfg := storeConfig(path)
	cfg.BusyTimeout = 100 * time.Millisecond
	s, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ready(context.Background()); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("ready while another process holds WAL = %v; want ErrUnavailable", err)
	}
	other.Close()
	s = sqlitetest.Open(t, storeConfig(path))
	allow(t, s, ping, "k", t0)
	if mode := sqlitetest.QueryString(t, sqlitetest.Inspect(t, path), `PRAGMA journal_mode`); mode != "delete" {
		t.Errorf("journal mode after open = %q, want delete", mode)
	}
}

func TestOpenNamesTheFileWhenItIsNotADatabase(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "garbage.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database ", 400)), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(context.Background(), storeConfig(path))
	if err != nil {
		t.Fatalf("open = %v; want a store, which opens the file when Ready", err)
	}
	defer s.Close()
	err = s.Ready(context.Background())
	if err == nil || !strings.Contains(err.Error(), path) || errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("ready on garbage = %v; want a fatal error naming %s", err, path)
	}
	if f := fault.Of(err); f != fault.Corrupt {
		t.Errorf("fault %q, want %q", f, fault.Corrupt)
	}
	// What failed is opening the file, not a setting of the connection.
	if strings.Contains(err.Error(), "busy timeout") {
		t.Errorf("ready on garbage = %v; it says the busy timeout failed", err)
	}
}

func TestMissingDirectoryIsUnavailableUntilItReturns(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "mnt")
	path := filepath.Join(dir, "ratelimit.db")
	s, err := sqlite.Open(context.Background(), storeConfig(path))
	if err != nil {
		t.Fatalf("open with missing directory = %v; want a store", err)
	}
	defer s.Close()
	if err := s.Ready(context.Background()); !errors.Is(err, limiter.ErrUnavailable) {
		t.Fatalf("ready with missing directory = %v; want ErrUnavailable", err)
	}
	_, err = s.Allow(context.Background(), storetest.One(ping, "k", t0, "", ""))
	if !errors.Is(err, limiter.ErrUnavailable) || !strings.Contains(err.Error(), path) || fault.Of(err) != fault.Unavailable {
		t.Fatalf("allow = %v (fault %q); want ErrUnavailable naming the path, fault %q", err, fault.Of(err), fault.Unavailable)
	}
	os.Mkdir(dir, 0o755)
	if d := allow(t, s, ping, "k", t0); !d.Allowed || d.Count != 1 {
		t.Fatalf("after the directory returned: %+v, want allowed with count 1", d)
	}
}

func TestDeletedFileIsReopened(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "ratelimit.db")
	s := sqlitetest.Open(t, storeConfig(path))
	allow(t, s, ping, "k", t0)
	allow(t, s, ping, "k", t0)
	os.Remove(path)
	// The next write finds its file gone (SQLite checks before it writes)
	// and reopens a fresh one instead of counting on in the unlinked file.
	d := allow(t, s, ping, "k", t0)
	if d.Count != 1 {
		t.Errorf("count after the file was deleted = %d, want 1 in a new file", d.Count)
	}
	if n := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, path), `SELECT count FROM rate_limit_windows`); n != 1 {
		t.Errorf("new file holds count %d, want 1", n)
	}
}

func TestLockHeldPastBusyTimeoutIsUnavailableThenRecovers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "locked.db")
	cfg := storeConfig(path)
	cfg.BusyTimeout = 50 * time.Millisecond
	s := sqlitetest.Open(t, cfg)
	conn, err := sqlitetest.Connect(t, path).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	_, err = s.Allow(context.Background(), storetest.One(ping, "k", t0, "", ""))
	if !errors.Is(err, limiter.ErrUnavailable) || !strings.Contains(err.Error(), "locked") || fault.Of(err) != fault.Busy {
		t.Fatalf("allow while locked = %v (fault %q); want ErrUnavailable (database is locked), fault %q", err, fault.Of(err), fault.Busy)
	}
	conn.ExecContext(context.Background(), `ROLLBACK`)
	conn.Close()
	if d := allow(t, s, ping, "k", t0); d.Count != 1 {
		t.Fatalf("after the lock was released: count %d, want 1 (the failed attempt left nothing)", d.Count)
	}
}

func TestRequestDeadlineEndsTheLockWait(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "locked.db")
	cfg := storeConfig(path)
	cfg.BusyTimeout = envconfig.MaxBusyTimeout
	s := sqlitetest.Open(t, cfg)
	conn, err := sqlitetest.Connect(t, path).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Allow(ctx, storetest.One(ping, "k", t0, "", ""))
	// The busy timeout is 20 s; returning at all before it shows the
	// deadline, not the timeout, ended the wait.
	if !errors.Is(err, limiter.ErrUnavailable) || time.Since(start) >= envconfig.MaxBusyTimeout/2 {
		t.Fatalf("allow = %v after %v; want ErrUnavailable once the 100ms deadline passed", err, time.Since(start))
	}
	conn.ExecContext(context.Background(), `ROLLBACK`)
}

func TestWaitsForAHeldLockAndCountsRetries(t *testing.T) {
	t.Parallel()
	for _, sqliteHandler := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "held.db")
		s := sqlitetest.OpenTuned(t, storeConfig(path), sqlitetune.Options{SQLiteBusyHandler: sqliteHandler})
		conn, err := sqlitetest.Connect(t, path).Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
			t.Fatal(err)
		}
		released := make(chan struct{})
		go func() {
			time.Sleep(50 * time.Millisecond)
			conn.ExecContext(context.Background(), `ROLLBACK`)
			conn.Close()
			close(released)
		}()
		d := allow(t, s, ping, "k", t0) // waits for the release, well within 5 s
		<-released
		if d.Count != 1 {
			t.Errorf("sqlite handler %v: count %d, want 1", sqliteHandler, d.Count)
		}
		if retries := s.Stats().BusyRetries; sqliteHandler && retries != 0 || !sqliteHandler && retries == 0 {
			t.Errorf("sqlite handler %v: %d busy retries counted", sqliteHandler, retries)
		}
	}
}

func TestReaderNoticesAReplacedFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "ratelimit.db")
	allow(t, sqlitetest.Open(t, storeConfig(path)), ping, "k", t0)
	r := sqlitetest.Open(t, readOnlyConfig(path))
	if u, _ := r.Usage(context.Background(), ping, "k", t0); u.Count != 1 {
		t.Fatalf("count %d, want 1", u.Count)
	}
	// Another file takes the path (a restore from backup, say), with a
	// different count. Readers are not warned by SQLite, so the store looks
	// at most once per FileCheckInterval of real time.
	other := filepath.Join(dir, "other.db")
	w := sqlitetest.Open(t, storeConfig(other))
	allow(t, w, ping, "k", t0)
	allow(t, w, ping, "k", t0)
	w.Close()
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}
	time.Sleep(sqlite.FileCheckInterval)
	if u, err := r.Usage(context.Background(), ping, "k", t0); err != nil || u.Count != 2 {
		t.Errorf("after the file was replaced: %+v, %v; want the new file's count 2", u, err)
	}
}

func TestOpenRefusesADirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if s, err := sqlite.Open(context.Background(), storeConfig(dir)); s != nil || err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("open of a directory = %v, %v; want a fatal error", s, err)
	}
}

// TestAPathThatNamesADirectoryIsRefused: a path ending in a slash, "."
// or ".." names a directory, whatever is there now. Through a directory
// that does not exist ("d/../e/..") it could not be looked at, and a
// store opened on it failed every decision.
func TestAPathThatNamesADirectoryIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, path := range []string{dir + "/rl.db/", dir + "/sub/.", dir + "/rl.db/..", dir + "/d/../e/..", "."} {
		if err := (sqlite.Config{Path: path}).Validate(); err == nil || !strings.Contains(err.Error(), "names a directory, not the database file") {
			t.Errorf("%s: %v, want it refused", path, err)
		}
	}
	if err := (sqlite.Config{Path: dir + "/d/../rl.db"}).Validate(); err != nil {
		t.Errorf("a path through .. that names a file: %v", err)
	}
}

func TestAnotherProcessSwitchingToWALIsRefused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rl.db")
	s := sqlitetest.Open(t, storeConfig(path))
	allow(t, s, ping, "k", t0)
	// A local server configured for WAL opens the same file and switches it.
	wal := sqlitetest.Open(t, sqlite.Config{Path: path, JournalMode: "WAL", BusyTimeout: time.Second})
	allow(t, wal, ping, "k", t0)
	time.Sleep(sqlite.FileCheckInterval)
	// The rollback-journal store notices within a second and stops rather
	// than carry on in WAL, which is unsafe where it runs (EFS).
	if _, err := s.Allow(context.Background(), storetest.One(ping, "k", t0, "", "")); err == nil || !strings.Contains(err.Error(), "journal mode") || fault.Of(err) != fault.JournalMode {
		t.Errorf("allow after the switch = %v (fault %q); want an error about the journal mode, fault %q", err, fault.Of(err), fault.JournalMode)
	}
	wal.Close()
	// With the WAL process gone, the store reopens and sets DELETE again.
	if d := allow(t, s, ping, "k", t0); d.Count != 3 {
		t.Errorf("count after the WAL process left = %d, want 3", d.Count)
	}
	if mode := sqlitetest.QueryString(t, sqlitetest.Inspect(t, path), `PRAGMA journal_mode`); mode != "delete" {
		t.Errorf("journal mode = %q, want delete", mode)
	}
}

// TestACountNearAnInt64Saturates: the windows count denied attempts
// unconditionally, so a client denied long enough at a large cost drives
// its counter up without bound. Past an int64, SQLite turns the sum into a
// float, which the next decision could not read: every later request of
// the key failed (a 503, or, failing open, let through). The count stops
// at decide.CountCap instead, and denies.
func TestACountNearAnInt64Saturates(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, sqlite.Config{})
	p := limiter.Policy{Name: "ping", Limit: limiter.MaxLimit, Window: time.Hour}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	allow := func(cost int64) (limiter.Outcome, error) {
		return s.Allow(context.Background(), limiter.Attempt{Charges: []limiter.Charge{{Policy: p, Key: "k", Cost: cost}}, Now: at})
	}
	if _, err := allow(1); err != nil {
		t.Fatal(err)
	}
	db := sqlitetest.Connect(t, s.Path())
	if _, err := db.Exec(`UPDATE rate_limit_windows SET count = 9223372036854775000 WHERE key = 'k'`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		o, err := allow(limiter.MaxLimit)
		if err != nil || o.Allowed || o.Decisions[0].Count != decide.CountCap {
			t.Fatalf("a count past an int64: %+v, %v; want denied at MaxCount", o, err)
		}
	}
	if typ := sqlitetest.QueryString(t, db, `SELECT typeof(count) FROM rate_limit_windows WHERE key = 'k'`); typ != "integer" {
		t.Errorf("the stored count is a %s", typ)
	}
}

// TestOpenRefusesAJournalModeOfNoKind: a journal mode SQLite would take
// but the store cannot keep (MEMORY, OFF) or none at all used to open, and
// then fail every decision with "wrong journal mode"; it is refused at
// Open, with the modes it takes.
func TestOpenRefusesAJournalModeOfNoKind(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"bogus", "MEMORY", "off"} {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "x.db"), JournalMode: mode})
		if err == nil {
			s.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "not DELETE, TRUNCATE, PERSIST or WAL") {
			t.Errorf("journal mode %q: %v, want refused", mode, err)
		}
	}
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "x.db"), JournalMode: "truncate"})
	if err != nil {
		t.Fatalf("truncate in lower case: %v", err)
	}
	s.Close()
}

// TestChargesOnOneCounterReadItBeforeCountingIt: an attempt's charges are
// all read before any is counted, as the memory and DynamoDB stores do,
// so that one charge's count does not leak into another's previous
// window. Two policies that share a store key (no namespace, which
// limiter.Policies refuses but Store.Allow takes) with windows of 2m and
// 1m: at 00:03:00 the fixed 2m window's counter is the sliding 1m
// window's previous one. Counting the fixed one first, then reading the
// sliding one's previous window after it (countSQL), weighed this
// attempt's own count and denied it, where before (readCharges, then the
// upserts) and the memory store allow it.
func TestChargesOnOneCounterReadItBeforeCountingIt(t *testing.T) {
	t.Parallel()
	long := limiter.Policy{Name: "long", Limit: 100, Window: 2 * time.Minute}
	slide := limiter.Policy{Name: "slide", Limit: 3, Window: time.Minute, Algorithm: limiter.Sliding}
	s := sqlitetest.Open(t, sqlite.Config{})
	m := memory.New()
	for _, at := range []time.Duration{130 * time.Second, 180 * time.Second, 181 * time.Second} {
		a := limiter.Attempt{Charges: []limiter.Charge{{Policy: long, Key: "k"}, {Policy: slide, Key: "k"}}, Now: t0.Add(at), Route: "GET /ping", RequestID: fmt.Sprint(at)}
		want, err := m.Allow(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Allow(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("at %v: the SQLite store decided %+v; the memory store %+v", at, got, want)
		}
	}
}

// TestInWALACommitWaitsForNoReader: in WAL the store commits without
// letting SQLite wait (wait.go, commit), because a COMMIT there waits for
// nobody. A reader holding its snapshot through more commits than the
// WAL holds before it is checkpointed (1,000 pages) must not make one of
// them fail as busy, nor lose a count.
func TestInWALACommitWaitsForNoReader(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "rl.db")
	s := sqlitetest.Open(t, sqlite.Config{Path: path, JournalMode: "WAL"})
	allow(t, s, ping, "k0", t0)
	ctx := context.Background()
	reader, err := sqlitetest.Connect(t, path).Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := reader.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var seen int
	if err := reader.QueryRowContext(ctx, "SELECT count(*) FROM api_calls").Scan(&seen); err != nil {
		t.Fatal(err)
	}
	wide := limiter.Policy{Name: "ping", Limit: 1_000_000, Window: time.Minute}
	const n = 1500
	for i := range n {
		if _, err := s.Allow(ctx, storetest.One(wide, fmt.Sprint("k", i%300), t0, "", "")); err != nil {
			t.Fatalf("commit %d with a reader holding its snapshot: %v", i, err)
		}
	}
	var still int
	if err := reader.QueryRowContext(ctx, "SELECT count(*) FROM api_calls").Scan(&still); err != nil || still != seen {
		t.Errorf("the reader's snapshot: %d rows (%v), want the %d it began with", still, err, seen)
	}
	reader.ExecContext(ctx, "COMMIT")
	if got := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, path), "SELECT count(*) FROM api_calls"); got != n+1 {
		t.Errorf("audit rows after the reader left: %d, want %d", got, n+1)
	}
}

// TestABusyTimeoutBelowAMillisecondIsRefused: SQLite waits for a lock in
// whole milliseconds, and a decision's own statements take longer than a
// microsecond: a BusyTimeout of 1ns used to be taken, and every
// uncontended decision then failed with "context deadline exceeded" (at
// 1µs, one in ten). 1ms and more are taken (BUSY_TIMEOUT's range), and
// zero is the default.
func TestABusyTimeoutBelowAMillisecondIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	for d, ok := range map[time.Duration]bool{-time.Second: false, time.Nanosecond: false, time.Microsecond: false, 999 * time.Microsecond: false, 0: true, time.Millisecond: true, time.Second: true} {
		err := sqlite.Config{Path: path, BusyTimeout: d}.Validate()
		if (err == nil) != ok || !ok && !strings.Contains(err.Error(), "1ms") {
			t.Errorf("BusyTimeout %v: %v, want accepted %v, a refusal naming 1ms", d, err, ok)
		}
	}
}
