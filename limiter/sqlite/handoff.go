package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// Handing decisions to the holder of the lock.
//
// With a rollback journal, each process commits its own decisions: sixteen
// processes that want one file at once (Lambda environments scaling out
// together, one request each) queue on its lock, and on EFS each of their
// transactions holds it for about 100 ms, so the last decides 1.5 s after
// the first, and one file decides about ten times a second whatever the
// number of environments. Group commit (batch.go) cannot help: it joins
// the decisions of one process.
//
// So a batch that finds the lock taken hands its attempts to whoever holds
// it:
//
//   - It writes them, with a deadline (its budget, or its context's end if
//     sooner) and a random token, to a request file in a directory beside
//     the database (path + "-handoff"), and waits for the lock as before.
//   - A batch that holds the lock reads the request files there just
//     before its COMMIT, in parallel, and decides every attempt of each in
//     its own transaction, after its own, as a batch decides its members:
//     each upsert sees the counts before it, each allowed attempt gets its
//     audit record. It writes each attempt's outcome, under its token, to a
//     table (handoffs), in the same transaction: the attempt is counted
//     exactly when its outcome is recorded.
//   - When the lock looks free, the waiter reads its tokens' outcomes, one
//     read transaction. Found, its batch is answered without a transaction
//     of its own, and it removes its request file. Not found, it tries the
//     lock again, and if it gets it, reads the outcomes again under the
//     lock (a holder may have committed them since), removes its request
//     file before its COMMIT, and decides what no holder decided.
//
// Nothing is counted twice: a holder decides a request only while it holds
// the lock, and only if no outcome of the request's is recorded, and a
// waiter that decides for itself has removed its request file, under the
// lock, before it commits (or, if the file cannot be removed, records its
// own outcomes, which any later holder finds). Nothing is lost: a request
// no holder took (it came too late, the holder failed or was killed before
// its COMMIT, the file could not be read) is decided by its own process,
// as before. A request whose deadline is less than a transaction away is
// left to its process, which will give up; as with a batch whose member's
// deadline passes during COMMIT, a request may still be counted just as
// its process gives up waiting.
//
// Only with a rollback journal (DELETE, TRUNCATE, PERSIST), where the lock
// is held for a transaction's fsyncs; in WAL a transaction holds it for a
// fraction of a millisecond, and the file and the read would cost more
// than they save. Cross-shard transactions (cross.go) neither hand off nor
// serve: they hold several locks, and are rarer.
//
// The handoffs table is created by the first holder that serves a
// request, not by a migration: a file that has one can still be opened by
// the previous release (which refuses a newer schema version) while a
// deployment rolls out, and a process of that release neither hands off
// nor serves. Prune deletes outcomes older than handoffKeep, and request
// files their processes left behind.

// handoffKeep is how long a recorded outcome, and a request file left
// behind, are kept: far beyond any waiter's deadline (at most BusyTimeout,
// or its context's, after the request was written).
const handoffKeep = 10 * time.Minute

const (
	createHandoffsSQL = `CREATE TABLE IF NOT EXISTS handoffs (
    token      TEXT PRIMARY KEY, -- the request's token, "." and the attempt's index in it
    outcome    BLOB NOT NULL,    -- decide.MarshalOutcome
    decided_at INTEGER NOT NULL  -- Unix nanoseconds, for Prune
) WITHOUT ROWID`
	// handedSQL reads the outcomes recorded under one request's tokens:
	// those from ?1 (its token and ".") up to ?2 (its token and "/", the
	// byte after ".").
	handedSQL      = `SELECT token, outcome FROM handoffs WHERE token >= ?1 AND token < ?2`
	recordSQL      = `INSERT INTO handoffs (token, outcome, decided_at) VALUES (?1, ?2, ?3)`
	pruneHandedSQL = `DELETE FROM handoffs WHERE decided_at < ?1`
)

// handoffDir is where the waiters of the file at path write their requests.
func handoffDir(path string) string { return path + "-handoff" }

// handsOff reports whether sh's batches hand their attempts to the holder
// of the lock, and serve others' (see above).
func (sh *shard) handsOff() bool {
	return !sh.cfg.ReadOnly && !sh.cfg.SQLiteBusyHandler && !strings.EqualFold(sh.cfg.JournalMode, "WAL")
}

// request is what a request file holds.
type request struct {
	Deadline time.Time         `json:"deadline"`
	Attempts []limiter.Attempt `json:"attempts"`
}

// handOff is one batch's request, written once the batch finds the lock
// taken, and the outcomes found for it.
type handOff struct {
	sh       *shard
	attempts []limiter.Attempt
	deadline time.Time
	token    string
	file     string // the request file, while it is there
	written  time.Time
	failed   bool   // writing it failed: the batch waits as it did before hand-offs
	outs     []decide.Outcome
	got      []bool
	answered bool // every attempt's outcome was found: the batch's answer is outs
}

// handOffDeadline is a request's deadline: the batch's budget's end, or
// its context's if sooner.
func handOffDeadline(ctx context.Context, budget time.Time) time.Time {
	if d, ok := ctx.Deadline(); ok && d.Before(budget) {
		return d
	}
	return budget
}

func newHandOff(sh *shard, batch []*pending, deadline time.Time) *handOff {
	ho := &handOff{sh: sh, deadline: deadline, outs: make([]decide.Outcome, len(batch)), got: make([]bool, len(batch))}
	for _, p := range batch {
		ho.attempts = append(ho.attempts, p.a)
	}
	return ho
}

// waiting writes the request file: the batch found the lock taken. Once
// only, whatever became of the file: a second request would carry the
// attempts of the first under new tokens, and an attempt decided under the
// first could be decided again under the second.
func (ho *handOff) waiting() {
	if ho.token != "" {
		return
	}
	var b [16]byte
	rand.Read(b[:])
	ho.token = hex.EncodeToString(b[:])
	body, err := json.Marshal(request{Deadline: ho.deadline, Attempts: ho.attempts})
	if err == nil {
		dir := handoffDir(ho.sh.path)
		name := filepath.Join(dir, ho.token)
		if err = writeNew(name, body); errors.Is(err, fs.ErrNotExist) {
			if err = os.Mkdir(dir, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
				err = writeNew(name, body)
			}
		}
		if err == nil {
			ho.file, ho.written = name, time.Now()
			return
		}
	}
	ho.failed = true
}

// writeNew writes body to a new file name. A holder that reads it before
// it is whole fails to parse it, and leaves it to its process.
func writeNew(name string, body []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(body)
	return errors.Join(err, f.Close())
}

// served reads, on h's connection, the outcomes recorded for the request,
// and reports whether every attempt has one: then the batch is answered.
// A read that fails (the table is not there yet, a commit holds the lock)
// finds none.
func (ho *handOff) served(ctx context.Context, h *handle) bool {
	if ho.file == "" || h == nil {
		return false
	}
	ho.read(ctx, h.db)
	for _, g := range ho.got {
		if !g {
			return false
		}
	}
	ho.answered = true
	ho.sh.batch.handed.Add(int64(len(ho.got)))
	// A process whose attempts others decide seldom holds the lock itself,
	// and would go on watching it at the pace of its first guess (a local
	// disk's transaction, a millisecond): what it waited is about one
	// transaction of the holder's, and sets the pace instead (wait.go).
	ho.sh.wait.store.observeHold(time.Since(ho.written))
	return true
}

// rowsQuerier is a database or transaction to read rows from.
type rowsQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// read notes the outcomes recorded under the request's tokens on q.
func (ho *handOff) read(ctx context.Context, q rowsQuerier) error {
	rows, err := q.QueryContext(ctx, handedSQL, ho.token+".", ho.token+"/")
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var token string
		var b []byte
		if err := rows.Scan(&token, &b); err != nil {
			return err
		}
		i, err := strconv.Atoi(strings.TrimPrefix(token, ho.token+"."))
		if err != nil || i < 0 || i >= len(ho.outs) {
			continue
		}
		if o, err := decide.UnmarshalOutcome(b); err == nil {
			ho.outs[i], ho.got[i] = o, true
		}
	}
	return rows.Err()
}

// claim runs in the batch's own transaction, which holds the lock: it
// reads what holders recorded for the request since, then takes the
// request back, so that no later holder decides it too (see above). It
// reports whether the batch must record its own outcomes: the request
// file could not be removed.
func (ho *handOff) claim(ctx context.Context, tx *sql.Tx) (record bool, err error) {
	if ho.file == "" {
		return false, nil
	}
	if err := ho.read(ctx, tx); err != nil && !noTable(err) {
		return false, err
	}
	if err := os.Remove(ho.file); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	ho.file = ""
	return false, nil
}

// done removes the request file, if it is still there: the batch has its
// answer, or gave up.
func (ho *handOff) done() {
	if ho.file != "" {
		os.Remove(ho.file)
		ho.file = ""
	}
}

// recordOwn records the outcomes the batch decided itself, where its
// request file could not be removed (claim).
func (ho *handOff) recordOwn(ctx context.Context, tx *sql.Tx, outs []decide.Outcome) error {
	if _, err := tx.ExecContext(ctx, createHandoffsSQL); err != nil {
		return err
	}
	now := time.Now().UnixNano()
	for i, o := range outs {
		if ho.got[i] || o.Refused != nil {
			continue
		}
		b, err := decide.MarshalOutcome(o)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, recordSQL, ho.token+"."+strconv.Itoa(i), b, now); err != nil {
			return err
		}
	}
	return nil
}

// noTable reports whether err says the handoffs table is not there: no
// holder has served a request on the file yet.
func noTable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table: handoffs")
}

// requestFile is a request file a holder found.
type requestFile struct {
	token string
	req   request
}

// serve decides, in tx, which holds the lock, the requests other
// processes' batches wrote, up to room attempts, except own (this batch's
// own token, if it wrote one); and reports how many it decided. A request
// that cannot be read, is past (or within hold of) its deadline, has an
// outcome recorded already, or has an attempt that is refused or fails,
// is left as it was, for its process; only the context's end fails tx.
func (sh *shard) serve(ctx context.Context, tx *sql.Tx, h *handle, at func(string) *statements, own string, room int) (int, error) {
	// A waiter writes its request from the waiting room (doHanding), so
	// an empty room means no request to serve: one look (F_GETLK), where
	// listing the directory would cost three or four calls on EFS, on
	// every transaction of a file that is seldom contended.
	if h.probe != nil && !h.probe.othersWaiting() {
		return 0, nil
	}
	reqs := readRequests(handoffDir(sh.path), own, room)
	if len(reqs) == 0 {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, createHandoffsSQL); err != nil {
		return 0, err
	}
	served := 0
	now := time.Now()
	for _, q := range reqs {
		if len(q.req.Attempts) > room-served {
			break
		}
		if !now.Add(sh.wait.holdTime()).Before(q.req.Deadline) {
			continue
		}
		n, err := sh.serveOne(ctx, tx, at, q, now)
		if err != nil {
			return served, ctx.Err() // nil unless the context ended
		}
		served += n
	}
	sh.batch.served.Add(int64(served))
	if testHookServed != nil {
		testHookServed(sh.path, served)
	}
	return served, nil
}

// testHookServed, when set by a test, runs after a holder has decided the
// requests it found, before its COMMIT, with how many attempts it decided.
var testHookServed func(path string, n int)

// serveOne decides q's attempts in a savepoint of tx, all or none, and
// records their outcomes.
func (sh *shard) serveOne(ctx context.Context, tx *sql.Tx, at func(string) *statements, q requestFile, now time.Time) (int, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM handoffs WHERE token >= ?1 AND token < ?2`, q.token+".", q.token+"/").Scan(&n); err != nil || n > 0 {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `SAVEPOINT handoff`); err != nil {
		return 0, err
	}
	err := func() error {
		for i, a := range q.req.Attempts {
			if err := sh.mine(a); err != nil {
				return err
			}
			o, err := decideTx(ctx, at, a)
			if err != nil {
				return err
			}
			if o.Refused != nil {
				return o.Refused
			}
			b, err := decide.MarshalOutcome(o)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, recordSQL, q.token+"."+strconv.Itoa(i), b, now.UnixNano()); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		if _, rerr := tx.ExecContext(context.WithoutCancel(ctx), `ROLLBACK TO handoff; RELEASE handoff`); rerr != nil {
			return 0, rerr
		}
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `RELEASE handoff`); err != nil {
		return 0, err
	}
	return len(q.req.Attempts), nil
}

// mine reports why a, read from a request file, is not this shard's to
// decide: it is invalid, or a charge's key falls into another shard.
func (sh *shard) mine(a limiter.Attempt) error {
	if err := decide.Validate(a); err != nil {
		return err
	}
	for _, c := range a.Charges {
		if shardIndex(c.Key, sh.count) != sh.index {
			return fmt.Errorf("key %q is not shard %d's of %d", c.Key, sh.index, sh.count)
		}
	}
	return nil
}

// readRequests reads the request files in dir, but own, in parallel, and
// returns those it could parse, in the order of their names, up to room
// attempts in all.
func readRequests(dir, own string, room int) []requestFile {
	entries, err := os.ReadDir(dir)
	if err != nil || room <= 0 {
		return nil
	}
	var names []string
	for _, e := range entries {
		if name := e.Name(); name != own && isToken(name) {
			names = append(names, name)
		}
	}
	if len(names) > room {
		names = names[:room] // each request has an attempt at least
	}
	out := make([]requestFile, len(names))
	ok := make([]bool, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err == nil && json.Unmarshal(b, &out[i].req) == nil && len(out[i].req.Attempts) > 0 {
				out[i].token, ok[i] = name, true
			}
		})
	}
	wg.Wait()
	var reqs []requestFile
	for i := range out {
		if ok[i] {
			reqs = append(reqs, out[i])
		}
	}
	return reqs
}

// isToken reports whether name is a request's token: 32 hex digits.
func isToken(name string) bool {
	if len(name) != 32 {
		return false
	}
	_, err := hex.DecodeString(name)
	return err == nil
}

// pruneHandoffs deletes outcomes recorded more than handoffKeep before
// now, and request files as old, which their processes left behind.
func (sh *shard) pruneHandoffs(ctx context.Context, now time.Time) error {
	dir := handoffDir(sh.path)
	if _, err := os.Stat(dir); err != nil {
		return nil // no request was ever written, so no outcome recorded
	}
	before := now.Add(-handoffKeep)
	err := sh.write(ctx, "prune handoffs", func(tx *sql.Tx, _ *handle) error {
		_, err := tx.ExecContext(ctx, pruneHandedSQL, before.UnixNano())
		if noTable(err) {
			return nil
		}
		return err
	})
	entries, rerr := os.ReadDir(dir)
	if rerr != nil {
		return err
	}
	for _, e := range entries {
		if info, ierr := e.Info(); ierr == nil && isToken(e.Name()) && info.ModTime().Before(before) {
			if rmErr := os.Remove(filepath.Join(dir, e.Name())); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) && err == nil {
				err = fmt.Errorf("prune handoffs: %w", rmErr)
			}
		}
	}
	return err
}
