package sqlite

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ft251/ratelimit/internal/backoff"
	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// Handing decisions to the holder of the lock.
//
// With a rollback journal, each process commits its own decisions: sixteen
// processes that want one file at once (Lambda environments scaling out
// together, one request each) queue on its lock, and on EFS each of their
// transactions holds it for about 100 ms, so the last decides seconds
// after the first, and one file decides about ten times a second whatever
// the number of environments. Group commit (batch.go) cannot help: it
// joins the decisions of one process.
//
// So a batch that finds the lock taken hands its attempts to whoever holds
// it:
//
//   - It takes a slot of the request file beside the database (path +
//     "-handoff"), a byte-range lock of its own on the slot's lock byte,
//     and writes its attempts there with a random token and a deadline
//     (its budget's end, or its context's if sooner), synced, then waits
//     for the lock as before, from the waiting room.
//   - A batch that holds the lock, when the waiting room is not empty,
//     reads the request file just before its COMMIT and decides every
//     request it finds there in its own transaction, after its own
//     attempts, as a batch decides its members: each upsert sees the
//     counts before it, each allowed attempt gets its audit record. It
//     records each attempt's outcome under its token in a table
//     (handoffs), in the same transaction: an attempt is counted exactly
//     when its outcome is recorded.
//   - When the lock looks free, the waiter reads its tokens' outcomes, one
//     read. Found, its batch is answered without a transaction of its
//     own. Not found, it tries the lock again; if it gets it, it reads the
//     outcomes again under the lock (a holder may have committed them
//     since), clears its slot, synced, before its COMMIT, and decides what
//     no holder decided.
//
// Nothing is counted twice: a holder decides a request only while it holds
// the lock, only if no outcome of the request's is recorded, and a waiter
// decides for itself only under the lock, after reading the outcomes and
// clearing its slot; an outcome that is there but cannot be read fails the
// batch rather than be decided again. Nothing is lost: a request no holder
// took (it came too late, the holder failed or was killed before its
// COMMIT, the slot could not be written) is decided by its own process, as
// before. A request whose deadline is less than two transactions away is
// left to its process. As with a batch whose member's deadline passes
// during COMMIT, an attempt may still be counted as its process gives up
// waiting: a waiter reads its outcomes once more when its wait runs out.
//
// Why one file of slots under locks, not a file per request in a
// directory: on EFS, other hosts' new files show in a directory listing
// only once the NFS client's cache of the directory times out (acdirmin,
// 30 s by default, and Lambda's mount options are not the user's), and no
// lock flushes a directory's cache. A file's is flushed when a lock is
// taken on it and written back when one is released (FACTS: the client
// holds no delegation): so the holder reads the slots under a shared lock
// of a byte no waiter locks, and a waiter syncs what it writes.
//
// Only with a rollback journal (DELETE, TRUNCATE, PERSIST), where the lock
// is held for a transaction's fsyncs; in WAL a transaction holds it for a
// fraction of a millisecond, and the file and the read would cost more
// than they save. Cross-shard transactions (cross.go) neither hand off nor
// serve: they hold several locks, and are rarer. Only where byte-range
// locks are (unix).
//
// The handoffs table is created by the first holder that serves a
// request, not by a migration: a file that has one can still be opened by
// the previous release (which refuses a newer schema version) while a
// deployment rolls out, and a process of that release neither hands off
// nor serves. Prune deletes outcomes older than handoffKeep.

const (
	// handoffSlots is how many requests can wait at once on one file; a
	// batch that finds no slot free waits as it did before hand-offs.
	handoffSlots = 32
	// slotSize is the room of one request: about eight attempts of one
	// policy. A batch whose request does not fit waits as before.
	slotSize = 4096
	// slotLockBase is the lock byte of slot 0 (slot i's is base + i), and
	// servingBase slot 0's serving byte, which a holder read-locks, for
	// every slot at once, from before it reads the requests until its
	// COMMIT has ended, and no waiter locks: far past the slots' bytes, as
	// SQLite's own lock bytes are past a page.
	slotLockBase = 1 << 30
	servingBase  = slotLockBase + 1024
	// slotMagic begins a slot that holds a request, in this format:
	// token, deadline, the body's size, and a sum over them and the body
	// (encodeSlot). A slot of "RLHO1 " (the format before the sum) is not
	// read as a request, nor is one of these by a process of that release:
	// each is decided by its own process.
	slotMagic = "RLHO2 "
	// requestVersion is the version of a request's and an outcome's
	// encoding: a holder skips a request of another, and a waiter refuses
	// an outcome of another rather than decide its attempt again.
	requestVersion = 1
)

// handoffKeep is how long a recorded outcome is kept: far beyond any
// waiter's deadline, which is at most BusyTimeout after it wrote its
// request.
func (sh *shard) handoffKeep() time.Duration {
	return max(10*time.Minute, 2*sh.cfg.BusyTimeout)
}

const (
	// A token begins with the time its request was written, so the
	// outcomes of one transaction are appended side by side (a page or two
	// of the journal, where random keys would touch a page each) and
	// Prune walks the oldest as a prefix of the key.
	createHandoffsSQL = `CREATE TABLE IF NOT EXISTS handoffs (
    token   TEXT PRIMARY KEY, -- the request's token, "." and the attempt's index in it
    outcome BLOB NOT NULL     -- decide.MarshalOutcome
) WITHOUT ROWID`
	// handedSQL reads the outcomes recorded under one request's tokens:
	// those from ?1 (its token and ".") up to ?2 (its token and "/", the
	// byte after ".").
	handedSQL      = `SELECT token, outcome FROM handoffs WHERE token >= ?1 AND token < ?2`
	countHandedSQL = `SELECT count(*) FROM handoffs WHERE token >= ?1 AND token < ?2`
	recordSQL      = `INSERT INTO handoffs (token, outcome) VALUES (?1, ?2)`
	// pruneHandedBatchSQL deletes up to ?2 outcomes of requests written
	// before ?1 (tokenTime's).
	pruneHandedBatchSQL = `DELETE FROM handoffs WHERE token IN (SELECT token FROM handoffs WHERE token < ?1 LIMIT ?2)`
)

// requestPath is the request file of the database at path.
func requestPath(path string) string { return path + "-handoff" }

// handsOff reports whether sh's batches hand their attempts to the holder
// of the lock, and serve others' (see above).
func (sh *shard) handsOff() bool {
	return slotLocks && !sh.cfg.ReadOnly && !sh.cfg.SQLiteBusyHandler && !strings.EqualFold(sh.cfg.JournalMode, "WAL")
}

// requests is a shard's request file, opened once and kept open: closing
// any descriptor of a file drops every lock the process holds on it.
type requests struct {
	mu sync.Mutex
	f  *os.File
	// missing is when the file was last found not to be there: a holder
	// looks again a second later at the soonest, so that a file no batch
	// waited long for costs its decisions nothing.
	missing time.Time
	// serving is set while this process holds the serving bytes' lock.
	serving bool
}

// endServing lets the serving bytes go, if this process holds them: its
// transaction has committed or failed.
func (r *requests) endServing() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.serving && r.f != nil {
		unlockServing(r.f)
	}
	r.serving = false
}

// file returns the request file, opening it (creating it, if create) the
// first time.
func (r *requests) file(path string, create bool) (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != nil {
		return r.f, nil
	}
	if !create && time.Since(r.missing) < time.Second {
		return nil, os.ErrNotExist
	}
	flags := os.O_RDWR
	if create {
		flags |= os.O_CREATE
	}
	f, err := os.OpenFile(requestPath(path), flags, 0o644)
	if err != nil {
		if !create {
			r.missing = time.Now()
		}
		return nil, err
	}
	r.f = f
	return f, nil
}

func (r *requests) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
}

// request is what a slot holds after its header.
type request struct {
	V        int               `json:"v"`
	Attempts []limiter.Attempt `json:"attempts"`
}

// errUnreadable is an outcome recorded for a request that cannot be read
// back: its attempt was counted, and is not decided again.
var errUnreadable = errors.New("an outcome decided by another process cannot be read")

// handOff is one batch's request, written once the batch finds the lock
// taken, and the outcomes found for it.
type handOff struct {
	sh       *shard
	attempts []limiter.Attempt
	deadline time.Time
	token    string // set once the batch tried to write its request
	slot     int    // the slot it holds, or -1
	cleared  bool   // its slot was cleared under the lock (claim)
	written  time.Time
	outs     []decide.Outcome
	got      []bool
	answered bool // every attempt's outcome was found: the batch's answer is outs
	found    int  // outcomes found, for Stats.HandedOff
	busies   int  // times it found the lock taken
}

// newHandOff is batch's hand-off, or nil when its attempts cannot be
// handed off: a string that is not UTF-8 would not come back from JSON
// as it went.
func newHandOff(sh *shard, batch []*pending, deadline time.Time) *handOff {
	ho := &handOff{sh: sh, deadline: deadline, slot: -1, outs: make([]decide.Outcome, len(batch)), got: make([]bool, len(batch))}
	for _, p := range batch {
		if !utf8Attempt(p.a) {
			return nil
		}
		ho.attempts = append(ho.attempts, p.a)
	}
	return ho
}

func utf8Attempt(a limiter.Attempt) bool {
	if !utf8.ValidString(a.Route) || !utf8.ValidString(a.RequestID) {
		return false
	}
	for _, c := range a.Charges {
		p := c.Policy
		if !utf8.ValidString(c.Key) || !utf8.ValidString(c.Tier) || !utf8.ValidString(p.Name) || !utf8.ValidString(p.Namespace) || !utf8.ValidString(string(p.Algorithm)) {
			return false
		}
		for name := range p.Tiers {
			if !utf8.ValidString(name) {
				return false
			}
		}
	}
	return true
}

// handOffDeadline is a request's deadline: the batch's budget's end, or
// its context's if sooner.
func (sh *shard) handOffDeadline(ctx context.Context, budget time.Time) time.Time {
	if d, ok := ctx.Deadline(); ok && d.Before(budget) {
		return d
	}
	return budget
}

// busy notes that the batch found the lock taken, and writes its request
// when that looks like a queue: the second time, or the first where this
// shard's batches have lately found it taken at least every other time;
// and a batch that has waited two transactions' time writes it then
// (waitTurn). A request costs its slot's lock, a write and a sync, and
// clearing it under the lock when no holder took it. Where waits are
// short (64 shards for 16 processes) most are not taken: writing one at
// every first sight of a taken lock cost 12% of the decisions there, and
// waiting for a queue costs nothing measurable; on one file, where batches
// find the lock taken nearly every time, a request written at once is
// taken by the holder in flight (BENCHMARKS.md, "One commit for several
// processes").
func (ho *handOff) busy() {
	ho.busies++
	if ho.busies >= 2 || ho.sh.wait.queued.Load() >= 512 {
		ho.waiting()
	}
}

// settle folds the batch's waits into the shard's average (busy).
func (ho *handOff) settle() {
	fold(&ho.sh.wait.queued, int64(ho.busies)*1024, false)
}

// waiting writes the request: the batch found the lock taken. Once only,
// whatever became of it: a second request would carry the attempts of the
// first under new tokens, and an attempt decided under the first could be
// decided again under the second.
func (ho *handOff) waiting() {
	if ho.token != "" {
		return
	}
	var b [8]byte
	cryptoRead(b[:])
	ho.token = tokenTime(time.Now()) + hex.EncodeToString(b[:])
	slot, err := encodeSlot(ho.token, ho.deadline, request{V: requestVersion, Attempts: ho.attempts})
	if err != nil || len(slot) > slotSize {
		return
	}
	f, err := ho.sh.requests.file(ho.sh.path, true)
	if err != nil {
		return
	}
	first := rand.IntN(handoffSlots)
	for k := range handoffSlots {
		i := (first + k) % handoffSlots
		if lockSlot(f, i) {
			ho.slot = i
			break
		}
	}
	if ho.slot < 0 {
		return
	}
	// From here the slot may hold the request, whether or not the write
	// reports success: claim clears it before the batch decides itself.
	if _, err := f.WriteAt(slot, int64(ho.slot)*slotSize); err == nil && f.Sync() == nil {
		ho.written = time.Now()
	}
}

// tokenTime is how a token begins for a request written at t: its Unix
// nanoseconds in 16 hex digits, which sort as the times do.
func tokenTime(t time.Time) string { return fmt.Sprintf("%016x", uint64(t.UnixNano())) }

// cryptoRead fills b with random bytes.
func cryptoRead(b []byte) { _, _ = crand.Read(b) }

// served reads, on h's connection, the outcomes recorded for the request,
// and reports whether every attempt has one: then the batch is answered.
// A read that fails (the table is not there yet, a commit holds the lock)
// finds none: the batch goes on waiting, and reads again.
func (ho *handOff) served(ctx context.Context, h *handle) bool {
	if ho.written.IsZero() || ho.cleared {
		return false
	}
	return ho.collect(ctx, h, false)
}

// collect reads the outcomes on h's connection, and reports whether every
// attempt has one: then the batch is answered. The read may take until the
// request's deadline: on slow storage a read is several round trips (the
// shared lock's three, the pages), and a read cut off at a fixed bound
// (once 100 ms) sent every served waiter to take the lock after all, to
// read its outcomes there, one after another (BENCHMARKS.md, "Cold starts
// on a new file").
//
// A call with no time left reads anyway, since a holder may have counted
// its attempts, and its client would be told of an error for an attempt
// that was counted: for as long as such reads take here (readBound), not
// a fixed 100 ms. A call whose client has gone (ctx cancelled) reads for
// no longer than that either, rather than hold the shard's one connection
// for the rest of its budget. The time a read takes is the query's, not
// the wait for the connection, which another of this process's calls may
// hold.
//
// The last read (last: the call gives up after it) is tried again while
// it is refused because another process is committing (SQLITE_BUSY: the
// store lets SQLite wait for nothing), until that bound, the connection
// given back between tries (readOn): taken for no outcome, it told the
// client of an error for an attempt that was counted.
func (ho *handOff) collect(ctx context.Context, h *handle, last bool) bool {
	if h == nil {
		return false
	}
	bound := ho.sh.wait.store.readBound(ho.sh.cfg.BusyTimeout)
	if ctx.Err() == nil {
		bound = max(bound, time.Until(ho.deadline))
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	for {
		err := ho.readOn(ctx, h)
		if err == nil {
			break
		}
		if !last || !isBusy(err) || backoff.Sleep(ctx, ho.sh.wait.pause(0, true)) != nil {
			return false
		}
	}
	if !ho.allGot() {
		return false
	}
	ho.answered = true
	// A process whose attempts others decide seldom holds the lock itself,
	// and would go on watching it at the pace of its first guess (a local
	// disk's transaction, a millisecond): what it waited is about one
	// transaction of the holder's, and sets the pace instead (wait.go).
	ho.sh.wait.store.observeHold(time.Since(ho.written))
	return true
}

// readOn reads the outcomes on h's connection, taken for the read and
// given back after it (not held while the caller sleeps between tries),
// and folds the read's time, not the wait for the connection, into the
// store's average.
func (ho *handOff) readOn(ctx context.Context, h *handle) error {
	conn, err := h.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	begun := time.Now()
	testHook("outcomes", ho.sh.path)
	if err := ho.read(ctx, conn); err != nil {
		return err
	}
	ho.sh.wait.store.observeRead(time.Since(begun))
	return nil
}

// settleLate runs when the batch's call fails (its wait ran out, its
// context ended, the file failed) while its request may still be taken:
// a holder that took it may count it and commit after the call gave up,
// and the client would be told of an error for an attempt that was
// counted. So it clears the slot, synced: no holder that reads the
// requests from now on sees it. A holder that read them before holds the
// slot's serving byte until its COMMIT has ended; so it waits while that
// byte is held (by some holder), a second and two of the longest
// transactions at most, and then reads the outcomes. It reports whether
// every attempt was decided so: then the batch is answered, late.
// Otherwise none was, unless a holder held the byte past that bound.
func (ho *handOff) settleLate(ctx context.Context, h *handle) bool {
	if ho.slot < 0 || ho.cleared || h == nil {
		return false
	}
	if ho.clear(true) != nil {
		return false
	}
	ho.cleared = true
	f, err := ho.sh.requests.file(ho.sh.path, false)
	if err != nil {
		return false
	}
	w := &ho.sh.wait
	until := time.Now().Add(time.Second + 2*time.Duration(w.longest.Load()))
	for servingHeld(f, ho.slot) && time.Now().Before(until) {
		time.Sleep(w.pause(0, true))
	}
	return ho.collect(ctx, h, true)
}

// allGot reports whether every attempt's outcome was found.
func (ho *handOff) allGot() bool {
	for _, g := range ho.got {
		if !g {
			return false
		}
	}
	return true
}

// rowsQuerier is a database or transaction to read rows from.
type rowsQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// read notes the outcomes recorded under the request's tokens on q. A row
// that cannot be read back is errUnreadable.
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
			return fmt.Errorf("%w: token %q", errUnreadable, token)
		}
		o, err := decide.UnmarshalOutcome(b)
		if err != nil {
			return fmt.Errorf("%w: %v", errUnreadable, err)
		}
		if !ho.got[i] {
			ho.outs[i], ho.got[i] = o, true
			ho.found++
		}
	}
	return rows.Err()
}

// claim runs in the batch's own transaction, which holds the lock: it
// reads what holders recorded for the request since, then clears the
// request's slot, synced, so that no later holder decides it too (see
// above). An error fails the transaction.
func (ho *handOff) claim(ctx context.Context, tx *sql.Tx) error {
	if ho.slot < 0 || ho.cleared {
		return nil
	}
	if err := ho.read(ctx, tx); err != nil && !noTable(err) {
		return err
	}
	if err := ho.clear(true); err != nil {
		return fmt.Errorf("clear a hand-off request: %w", err)
	}
	ho.cleared = true
	return nil
}

// clear overwrites the slot's header, synced if sync.
func (ho *handOff) clear(sync bool) error {
	f, err := ho.sh.requests.file(ho.sh.path, false)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(make([]byte, len(slotMagic)+1), int64(ho.slot)*slotSize); err != nil {
		return err
	}
	if sync {
		return f.Sync()
	}
	return nil
}

// done gives the slot back, cleared: the batch has its answer, or gave up.
// Unlocking writes the cleared header back.
func (ho *handOff) done() {
	ho.settle()
	if ho.slot < 0 {
		return
	}
	if !ho.cleared {
		ho.clear(false)
	}
	if f, err := ho.sh.requests.file(ho.sh.path, false); err == nil {
		unlockSlot(f, ho.slot)
	}
	ho.slot = -1
}

// noTable reports whether err says the handoffs table is not there: no
// holder has served a request on the file yet.
func noTable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table: handoffs")
}

// waitingRequest is a request a holder found in a slot.
type waitingRequest struct {
	token    string
	deadline time.Time
	req      request
}

// serve decides, in tx, which holds the lock for ho's batch, the requests
// waiting in the request file, up to room attempts, but the batch's own;
// and reports how many attempts it decided. A request that cannot be
// read, is within two transactions of its deadline, has an outcome
// recorded already, or has an attempt that is refused or fails, is left
// as it was, for its process. Nothing is served when ctx ends within two
// transactions, or when no waiter holds a slot. The transaction fails only when ctx ends, or when the table
// cannot be created or a failed request cannot be rolled back.
func (sh *shard) serve(ctx context.Context, tx *sql.Tx, ho *handOff, at func(string) *statements, room int) (int, error) {
	hold := sh.wait.holdTime()
	margin := max(2*hold, time.Duration(sh.wait.longest.Load()), 50*time.Millisecond)
	if d, ok := ctx.Deadline(); room <= 0 || ok && time.Until(d) < 2*hold {
		return 0, nil
	}
	// No request file (no batch ever waited long here): nothing, and the
	// file is looked for once a second at most. Else one F_GETLK over the
	// slots' lock bytes tells whether a waiter holds one.
	f, err := sh.requests.file(sh.path, false)
	if err != nil || !slotsTaken(f) {
		return 0, nil
	}
	now := time.Now()
	reqs := sh.readRequests(f, ho.token, now.Add(margin))
	if len(reqs) == 0 {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, createHandoffsSQL); err != nil {
		return 0, err
	}
	served := 0
	for _, q := range reqs {
		if len(q.req.Attempts) > room-served {
			continue
		}
		n, err := sh.serveOne(ctx, tx, at, q)
		if err != nil {
			return served, err
		}
		served += n
	}
	if testHookServed != nil {
		testHookServed(sh.path, served)
	}
	return served, nil
}

// testHookServed, when set by a test, runs after a holder has decided the
// requests it found, before its COMMIT, with how many attempts it decided.
var testHookServed func(path string, n int)

// serveOne decides q's attempts in a savepoint of tx, all or none, and
// records their outcomes; it reports how many it decided. A request it
// leaves is no error; only the context's end or a savepoint that cannot be
// rolled back is, and fails tx.
func (sh *shard) serveOne(ctx context.Context, tx *sql.Tx, at func(string) *statements, q waitingRequest) (int, error) {
	var n int
	if err := tx.QueryRowContext(ctx, countHandedSQL, q.token+".", q.token+"/").Scan(&n); err != nil || n > 0 {
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
			if _, err := tx.ExecContext(ctx, recordSQL, q.token+"."+strconv.Itoa(i), b); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		if _, rerr := tx.ExecContext(context.WithoutCancel(ctx), `ROLLBACK TO handoff; RELEASE handoff`); rerr != nil {
			return 0, fmt.Errorf("roll a hand-off back: %w", rerr)
		}
		return 0, ctx.Err()
	}
	if _, err := tx.ExecContext(ctx, `RELEASE handoff`); err != nil {
		return 0, err
	}
	return len(q.req.Attempts), nil
}

// mine reports why a, read from the request file, is not this shard's to
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

// readRequests takes the shared lock of the serving bytes (which makes the
// NFS client drop its cache of the file, so that what other hosts wrote
// and synced is read), reads the request file, and returns the requests
// its slots hold, but own and those whose deadline is before by. The lock
// is kept, if it was taken, until endServing, after the COMMIT.
func (sh *shard) readRequests(f *os.File, own string, by time.Time) []waitingRequest {
	if !lockServing(f) {
		return nil
	}
	sh.requests.mu.Lock()
	sh.requests.serving = true
	sh.requests.mu.Unlock()
	buf := make([]byte, handoffSlots*slotSize)
	n, _ := f.ReadAt(buf, 0) // io.EOF past the file's end: n says what was read
	if n == 0 {
		return nil
	}
	var out []waitingRequest
	for i := 0; i+len(slotMagic) <= n; i += slotSize {
		if q, ok := parseSlot(buf[i:min(i+slotSize, n)]); ok && q.token != own && q.deadline.After(by) {
			out = append(out, q)
		}
	}
	return out
}

// encodeSlot is what a slot holds for req under token, due by deadline.
//
// The header carries a sum over itself and the body because a holder may
// read a slot while its waiter writes a new request over the one it held
// before: nothing orders a read of the file against another process's
// write, and Linux does not make the two atomic to each other, so a
// reader can see the new header with the old body, or any splice of the
// two. Read as a request, that decided the old attempts again under the
// new token, and answered the new request with their outcomes (a tester
// saw a waiter told of another key's count).
func encodeSlot(token string, deadline time.Time, req request) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	fields := fmt.Sprintf("%s %d %d", token, deadline.UnixNano(), len(body))
	return append(fmt.Appendf(nil, "%s%s %s\n", slotMagic, fields, slotSum(fields, body)), body...), nil
}

// slotSum is the sum of a slot's header fields and body: the first 16
// bytes of their SHA-256, in hex.
func slotSum(fields string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(fields))
	h.Write([]byte{'\n'})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// parseSlot reads the request in one slot, if it holds a whole one.
func parseSlot(b []byte) (waitingRequest, bool) {
	var q waitingRequest
	if !bytes.HasPrefix(b, []byte(slotMagic)) {
		return q, false
	}
	end := bytes.IndexByte(b, '\n')
	if end < 0 {
		return q, false
	}
	// The sum is the header's last field, over what comes before it.
	header := string(b[len(slotMagic):end])
	cut := strings.LastIndexByte(header, ' ')
	if cut < 0 {
		return q, false
	}
	summed, sum := header[:cut], header[cut+1:]
	fields := strings.Fields(summed)
	if len(fields) != 3 || !isToken(fields[0]) {
		return q, false
	}
	deadline, err1 := strconv.ParseInt(fields[1], 10, 64)
	size, err2 := strconv.Atoi(fields[2])
	if err1 != nil || err2 != nil || size < 0 || end+1+size > len(b) {
		return q, false
	}
	body := b[end+1 : end+1+size]
	if sum != slotSum(summed, body) {
		return q, false
	}
	if json.Unmarshal(body, &q.req) != nil || q.req.V != requestVersion || len(q.req.Attempts) == 0 {
		return q, false
	}
	q.token, q.deadline = fields[0], time.Unix(0, deadline)
	return q, true
}

// isToken reports whether s is a request's token: 32 hex digits.
func isToken(s string) bool {
	if len(s) != 32 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// pruneHandoffs deletes the outcomes of requests written more than
// handoffKeep ago, by this process's clock (a request is stamped by its
// waiter's: hosts whose clocks differ by more than that would lose an
// outcome their waiter still reads), PruneBatch per transaction. A file
// where no request was ever written has no outcome.
func (sh *shard) pruneHandoffs(ctx context.Context) (int64, error) {
	if _, err := os.Stat(requestPath(sh.path)); err != nil {
		return 0, nil
	}
	n, err := sh.deleteBatches(ctx, "prune handoffs", pruneHandedBatchSQL, tokenTime(time.Now().Add(-sh.handoffKeep())))
	if noTable(err) {
		return n, nil
	}
	return n, err
}
