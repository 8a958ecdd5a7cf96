// Package sqlite keeps the limiter's counters and audit records in a SQLite
// file that many processes share, such as Lambda execution environments
// mounting the same EFS file system, or, with Config.Shards, in
// several files beside it, each key's counters in one of them.
//
// Every decision is one immediate write transaction: an upsert that returns
// the new count, and the audit row when the attempt is allowed. SQLite's file
// locks serialize those transactions across processes, so counts stay exact
// however many processes share the file. Within a process, the decisions
// that arrive while a transaction of their file is in flight are decided
// together in its next transaction, one after another (group commit,
// batch.go): on EFS a transaction costs its round trips, whatever it
// writes. The database is opened for a network file system: a rollback
// journal (WAL needs shared memory on one host), synchronous=FULL, and one
// connection per file and process (in WAL, which only a local program may
// use, a second one checkpoints in the background: checkpoint.go).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/internal/sqlitetune"
	"github.com/ft251/ratelimit/limiter"
	modernc "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Store is a limiter.Store on SQLite files: one (the default), or with
// cfg.Shards, several beside it, each key's counters in the file its client
// key hashes to (see shards.go). It is safe for simultaneous use by
// multiple goroutines; they share each file's one connection, and the
// decisions that arrive while one of a file's transactions is in flight
// are decided together in its next one (see batch.go).
//
// The store survives faults of the files beneath it. A failed open is
// retried on the next call, and at most once per FileCheckInterval (on the
// process's clock, not the request's instant) a call checks that the path
// still names the file the store has open: a database deleted or replaced
// under a running process is reopened (and, when its directory still
// exists, created afresh) instead of counting on in a file nobody else can
// see.
type Store struct {
	path   string // shard 0's: DB_PATH
	cfg    settings
	shards []*shard
	// layoutSeen is set once shard 0 has been opened, and with it the
	// layout checked, so that no other shard serves before (see first).
	layoutSeen atomic.Bool
}

// shard is one database file of a store, with its own connection, lock
// probe, waiting room and batches.
type shard struct {
	index, count int // this file's place in the layout: shard index of count
	path         string
	cfg          settings

	// mu guards h and checked. It is a channel so that a caller waiting for
	// another's reopen gives up when its context ends.
	mu      chan struct{}
	h       *handle   // nil until opened, and after a fault that needs a reopen
	checked time.Time // when the file's identity was last checked

	wait  waiter
	batch batcher
	// requests is the file where waiting batches hand their attempts to
	// the holder of the lock (handoff.go).
	requests requests
}

// FileCheckInterval is how often a store checks that its path still names the
// file it has open. Each check is one stat, a round trip on EFS.
const FileCheckInterval = time.Second

var _ limiter.Store = (*Store)(nil)

// errSchema and errJournalMode mark failures that retrying will not fix:
// a schema or layout this binary cannot use, and a journal mode that is
// not the configured one and would not be switched back.
var (
	errSchema      = errors.New("cannot be used")
	errJournalMode = errors.New("wrong journal mode")
)

// Open returns a store on the database at cfg.Path (and, with cfg.Shards
// above 1, the shard files beside it). It refuses what Config.Validate
// refuses, and opens nothing yet: Ready, or the first call, opens the
// databases, creating them and their schema when missing, or with
// cfg.ReadOnly, opens existing ones for reading. The measuring knobs of
// internal/sqlitetune ride on ctx.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	set := settings{Config: c, Options: sqlitetune.From(ctx)}
	s := &Store{path: c.Path, cfg: set}
	busy := &contention{}
	for i := range c.Shards {
		sh := &shard{index: i, count: c.Shards, path: ShardPath(c.Path, i), cfg: set, mu: make(chan struct{}, 1)}
		sh.wait.store = busy
		s.shards = append(s.shards, sh)
	}
	return s, nil
}

// settings are a store's Config, defaults filled in, and its measuring
// knobs.
type settings struct {
	Config
	sqlitetune.Options
}

// Ready opens the database at Path (shard 0) if it is not open, waiting
// for the lock like any call (cold starts that race to migrate a new file
// take turns), and reports what stands in the way. Errors wrapping
// limiter.ErrUnavailable (the directory is missing, the file is read-only,
// the lock is held past the busy timeout) may clear by themselves, and
// every call tries again. Other errors will not clear: the file is not a
// SQLite database or is corrupt, its schema is newer than this binary, its
// layout is another shard count's, or the journal mode does not take.
//
// The other shards open when a call first needs them, and report the same
// errors then, for the keys they keep. Shard 0 records the shard count, so
// a process started with another count is refused here all the same. A
// cold start that opened every shard took 4.4 s with 64 shards already
// migrated on the EFS model, and 9.1 s with 64 new ones, against a Lambda
// init phase of 10 s; it now opens two files (BENCHMARKS.md, "Cold starts
// with shards").
func (s *Store) Ready(ctx context.Context) error {
	if err := s.shards[0].ready(ctx); err != nil {
		return err
	}
	s.layoutSeen.Store(true)
	return nil
}

// ready opens sh's database if it is not open.
func (sh *shard) ready(ctx context.Context) error {
	return sh.do(ctx, "open", func(*handle) error { return nil })
}

// Path is the absolute path of the database file: shard 0's, DB_PATH.
func (s *Store) Path() string { return s.path }

// Paths are the absolute paths of every database file, by shard.
func (s *Store) Paths() []string {
	out := make([]string, len(s.shards))
	for i, sh := range s.shards {
		out[i] = sh.path
	}
	return out
}

// Close closes the databases. Calls after Close reopen them.
func (s *Store) Close() error {
	for _, sh := range s.shards {
		sh.mu <- struct{}{}
		if sh.h != nil {
			sh.retire(sh.h)
		}
		<-sh.mu
		sh.requests.close()
	}
	return nil
}

// handle is one open database with its prepared statements.
type handle struct {
	db    *sql.DB
	file  os.FileInfo // identity of the file opened, for the moved check
	probe *probe      // nil for a read-only store, or where unavailable
	stmts statements
	bulk  bulkStatements

	// Guarded by the shard's mu: calls in flight on the handle, and whether it
	// has been retired, to be closed when the last of them ends.
	refs    int
	retired bool
	// checkMode asks the next write to read the journal mode back, once
	// per FileCheckInterval: a process configured for WAL that opens the
	// same file would otherwise switch it, and this store with it.
	checkMode atomic.Bool
	// ckpt checkpoints a WAL database in the background; nil otherwise.
	ckpt *checkpointer
}

// lockProbe is h's probe, or nil where there is none.
func (h *handle) lockProbe() *probe {
	if h == nil {
		return nil
	}
	return h.probe
}

// close stops the checkpointer, closes the database and then the probe,
// whose descriptor on the same file would drop SQLite's locks if closed
// first.
func (h *handle) close() error {
	h.ckpt.close()
	err := h.db.Close()
	if h.probe != nil {
		h.probe.close()
	}
	return err
}

// dsn builds the connection string. Each pragma is here for a reason:
//   - busy_timeout: BusyTimeout while the connection opens, so that the
//     pragmas after it (journal_mode reads the file) wait for a commit in
//     progress rather than fail the open; open then sets 0 for the store's
//     calls, because the store waits for other processes' locks itself,
//     more fairly than SQLite does (see wait.go); only a COMMIT waiting for
//     readers lets SQLite wait. With SQLiteBusyHandler, SQLite waits up to
//     BusyTimeout throughout instead. Either way the driver gives up when
//     the call's context ends, so a request deadline is never overrun.
//   - journal_mode: a rollback journal works on any file system with POSIX
//     locks, EFS included; WAL does not work across hosts.
//   - synchronous=FULL: fsync the journal before the database is written and
//     the database before the journal is removed, so a committed decision
//     survives a crash of the process, the host, or the NFS client.
//   - _txlock=immediate: BEGIN takes the write lock at once. Deferred
//     transactions that read and then write deadlock on lock upgrade and fail
//     with SQLITE_BUSY whatever the timeout.
func dsn(path string, cfg settings) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", cfg.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode("+cfg.JournalMode+")")
	q.Add("_pragma", "synchronous("+synchronous(cfg.JournalMode)+")")
	q.Set("_txlock", "immediate")
	if cfg.ReadOnly {
		// SQLite's own URI parameter: open O_RDONLY and never create.
		q.Set("mode", "ro")
	}
	return fileURI(path, q)
}

// fileURI is the file: URI of the database at path with the parameters q:
// a file: URI passes SQLite's own parameters, and the path is escaped so
// that '?', '#' and '%' in it stay part of the name.
func fileURI(path string, q url.Values) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// synchronous is FULL for the rollback journal, as durability on a network
// file system requires, and NORMAL for WAL, which is only offered for the
// local server and is durable across process crashes at that level.
func synchronous(journalMode string) string {
	if strings.EqualFold(journalMode, "WAL") {
		return "NORMAL"
	}
	return "FULL"
}

// open opens the database, checks that the pragmas took, migrates the schema
// and charges (or records) the file's place in the layout (prepare), and
// prepares the statements the request path uses.
//
// A lock in the way does not make it start again from the beginning; it
// waits where it finds the lock, within the budget (see opening): cold
// starts on a new file all find each other's locks at once, and starting
// over (a new connection, the pragmas read back again) at every
// SQLITE_BUSY, each of them, kept them all from finishing.
func (sh *shard) open(ctx context.Context) (h *handle, err error) {
	testHook("open", sh.path)
	o := &opening{sh: sh, start: time.Now()}
	db, err := sql.Open("sqlite", dsn(sh.path, sh.cfg))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			db.Close()
			if o.probe != nil {
				o.probe.close() // after the database, see handle.close
			}
		}
	}()
	// One connection per process: decisions serialize on the file lock
	// anyway, and a second connection would only contend with the first.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := o.readsWait(ctx, db); err != nil {
		return nil, err
	}
	if err := sh.checkPragmas(ctx, db); err != nil {
		return nil, err
	}
	testHook("pragmas", sh.path)
	o.probe = sh.openProbe()
	if sh.cfg.ReadOnly {
		if err = checkVersion(ctx, db); err == nil {
			err = sh.checkLayout(ctx, db)
		}
	} else {
		err = sh.prepare(ctx, db, o)
	}
	if err != nil {
		return nil, err
	}
	testHook("migrated", sh.path)
	if err := refreshSchema(ctx, db); err != nil {
		return nil, err
	}
	file, err := os.Stat(sh.path)
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	h = &handle{db: db, file: file, probe: o.probe}
	if err := h.stmts.prepare(ctx, db, ""); err != nil {
		return nil, err
	}
	if err := o.done(ctx, db); err != nil {
		return nil, err
	}
	if strings.EqualFold(sh.cfg.JournalMode, "WAL") && !sh.cfg.ReadOnly {
		h.ckpt = startCheckpointer(ctx, sh.path, file)
	}
	return h, nil
}

// openProbe opens the lock probe a writer waits with, or returns nil: a
// read-only store takes no write lock, SQLite's busy handler waits on its
// own, and without a probe the store still waits, less fairly (wait.go).
func (sh *shard) openProbe() *probe {
	if sh.cfg.ReadOnly || sh.cfg.SQLiteBusyHandler {
		return nil
	}
	p, err := openProbe(sh.path, &sh.wait.probeFailures)
	if err != nil {
		return nil
	}
	return p
}

// testHookOpen, when set by a test, runs at points of open where another
// process may act: "open" (each time open begins), "pragmas" (the pragmas
// read back, the schema not yet migrated) and "migrated" (before the
// statements are prepared).
var testHookOpen func(stage, path string)

// testHookCommit, when set by a test, runs before every COMMIT of
// decisions (a batch, or a cross-shard transaction, with the path of its
// first file), and an error it returns fails the transaction.
var testHookCommit func(path string) error

func beforeCommit(path string) error {
	if testHookCommit != nil {
		return testHookCommit(path)
	}
	return nil
}

func testHook(stage, path string) {
	if testHookOpen != nil {
		testHookOpen(stage, path)
	}
}

// refreshSchema makes the connection reload the schema if another
// connection changed it since this one read it. A connection that opened a
// new, empty file reads its (empty) schema while applying the DSN's
// pragmas; if another cold start creates the tables and commits before this
// one reads user_version, migrate finds nothing to do (PRAGMA user_version
// does not check the schema cookie). Preparing a statement against the
// stale schema then fails with "no such table", unless SQLite can take a
// read lock to notice the schema changed; with another process committing
// at that moment (and busy_timeout 0) it cannot, and the error stands. A
// SELECT on sqlite_schema checks the cookie and reloads a stale schema,
// waiting for a commit in progress as every read of open does.
func refreshSchema(ctx context.Context, db *sql.DB) error {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	return nil
}

// checkPragmas reads back what the DSN asked for: a journal mode that
// SQLite could not set (another process holds the file in WAL, say) must
// not go unnoticed.
func (sh *shard) checkPragmas(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal mode: %w", err)
	}
	if !strings.EqualFold(mode, sh.cfg.JournalMode) {
		return fmt.Errorf("journal mode is %q, not %q: %w", mode, sh.cfg.JournalMode, errJournalMode)
	}
	var syncLevel int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncLevel); err != nil {
		return fmt.Errorf("read synchronous: %w", err)
	}
	if want := map[string]int{"NORMAL": 1, "FULL": 2}[synchronous(sh.cfg.JournalMode)]; syncLevel != want {
		return fmt.Errorf("synchronous is %d, not %d: %w", syncLevel, want, errJournalMode)
	}
	return nil
}

// acquire returns the open database, opening it if needed, with a
// reference the caller gives back with release. At most once per
// FileCheckInterval it checks that the path still names the open file; if
// the file was deleted or replaced, the handle is retired, to be closed
// when the calls still using it end, and a fresh one opened.
func (sh *shard) acquire(ctx context.Context) (*handle, error) {
	select {
	case sh.mu <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-sh.mu }()
	now := time.Now()
	if sh.h != nil && now.Sub(sh.checked) >= FileCheckInterval {
		sh.checked = now
		if sh.moved(sh.h) {
			sh.retire(sh.h)
		} else {
			sh.h.checkMode.Store(true)
		}
	}
	if sh.h == nil {
		h, err := sh.open(ctx)
		if err != nil {
			return nil, err
		}
		sh.h, sh.checked = h, now
	}
	sh.h.refs++
	return sh.h, nil
}

// moved reports whether the path no longer names h's file. A stat that
// fails for another reason than a missing file (a passing NFS error) says
// nothing, and keeps the handle.
func (sh *shard) moved(h *handle) bool {
	fi, err := os.Stat(sh.path)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return !os.SameFile(fi, h.file)
}

// release gives back a reference from acquire.
func (sh *shard) release(h *handle) {
	sh.mu <- struct{}{}
	defer func() { <-sh.mu }()
	if h.refs--; h.retired && h.refs == 0 {
		h.close()
	}
}

// retire forgets h, so that the next call opens the database afresh, and
// closes it now or when its last call ends. s.mu is held.
func (sh *shard) retire(h *handle) {
	if sh.h == h {
		sh.h = nil
	}
	if !h.retired {
		h.retired = true
		if h.refs == 0 {
			h.close()
		}
	}
}

// drop retires h if it is still the open handle: a call found it broken.
func (sh *shard) drop(h *handle) {
	sh.mu <- struct{}{}
	sh.retire(h)
	<-sh.mu
}

// wrap gives a failed call's error its context and its class (see
// fault.Class): a lock not granted in time is busy; a file that is not a
// database or is corrupt, a schema newer than this binary, a journal mode
// that will not take, are faults an operator must clear; the rest (missing,
// read-only or full files and directories, I/O errors) may clear by
// themselves.
func (sh *shard) wrap(op string, err error) error {
	return fault.Failed(classOf(err), "sqlite: %s %s: %w", op, sh.path, err)
}

// classOf is the class of err.
func classOf(err error) fault.Class {
	switch {
	case errors.Is(err, errSchema):
		return fault.Schema
	case errors.Is(err, errJournalMode):
		return fault.JournalMode
	case code(err) == sqlite3.SQLITE_NOTADB || code(err) == sqlite3.SQLITE_CORRUPT:
		return fault.Corrupt
	case errors.Is(err, errLockTimeout) || isBusy(err) || errors.Is(err, context.DeadlineExceeded):
		return fault.Busy
	}
	return fault.Unavailable
}

// code is the primary SQLite result code of err, or 0.
func code(err error) int {
	var e *modernc.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

// needsReopen reports whether err means the open handle cannot be trusted
// any more: the file vanished, turned read-only, failed I/O or now fails to
// read as a database.
func needsReopen(err error) bool {
	switch code(err) {
	case sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_IOERR,
		sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
		return true
	}
	return false
}
