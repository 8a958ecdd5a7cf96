package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ft251/ratelimit/internal/backoff"
	sqlite3 "modernc.org/sqlite/lib"
)

// Waiting for the lock.
//
// SQLite's own busy handler polls with sleeps that grow from 1 ms to 100 ms.
// Between processes that is unfair: a process that has waited a while sleeps
// 100 ms between tries, while a newcomer tries again after 1 ms and takes the
// lock first. Under contention some environments then starve; with four
// processes on a local disk, internal/cmd/loadtest saw one make 6 decisions in 3 s
// while another made 2,248, and its wait ran past the busy timeout.
//
// So the store waits itself. SQLite is told not to wait (busy_timeout 0)
// when a transaction begins, and a process that finds the lock taken:
//
//   - steps into a waiting room, a shared lock on a side file
//     (path + "-wait"), so that the holder can tell it is wanted;
//   - watches the holder's lock bytes with F_GETLK, which takes no lock and
//     costs one round trip, instead of trying SQLite's lock, which costs
//     four lock operations and, holding a shared lock for a moment, can
//     delay the holder's commit;
//   - watches at a pace tied to how long this process's transactions hold
//     the lock (learnt over all the store's shards), or to a quarter of
//     its wait so far when that is longer: every half transaction, at
//     most 50 ms, jittered (see pause);
//   - tries SQLite's lock when the holder is gone, until the budget
//     (BusyTimeout) or the request's deadline runs out, its last look
//     just before the budget's end, leaving room for its try (pauseWithin).
//
// Once the store has found the lock taken often (see contention), a
// transaction looks at the lock before its BEGIN, one F_GETLK, and waits
// as above if it is held, instead of paying for a BEGIN that fails.
//
// And a process that commits while others wait gives way: a transaction
// that would begin less than a quarter of a transaction after its last
// commit to the file waits out that quarter, long enough for a waiter to
// notice and take the lock, when the waiting room is not empty. Without
// that, on slow storage the process that just released the lock takes it
// straight back and the others starve. Where F_GETLK is unavailable,
// waiters simply retry every transaction's length (then half that),
// jittered.
//
// Blocking locks (F_SETLKW, F_OFD_SETLKW) are not used to wait: on EFS the
// Linux NFS client retries a blocked LOCK itself, sleeping 1 s and then
// longer between tries unless the server calls back, which EFS does not
// document, so a waiter would sleep past dozens of the lock's releases;
// and a lock of the store's own on SQLite's bytes would stand in SQLite's
// way (an OFD lock conflicts even with this process's SQLite).
//
// A transaction that holds the lock and only waits for readers to finish,
// at COMMIT, lets SQLite wait, up to the remaining budget: readers hold
// their lock for one short SELECT and cannot starve it, since SQLite admits
// no new readers once a writer is waiting to commit.

const (
	// minPoll and maxPoll bound one sleep between tries.
	minPoll = 50 * time.Microsecond
	maxPoll = 50 * time.Millisecond
	// lastTry is the room a wait leaves, after its last look, for the try
	// that look may lead to (a tenth of the budget, if less).
	lastTry = 5 * time.Millisecond
	// initialHold is the guess of a transaction's length before one has
	// been measured: a local disk's fsyncs.
	initialHold = time.Millisecond
)

// waiter holds a store's lock-waiting state.
type waiter struct {
	// store is what the store's shards learn together: how long a
	// transaction holds the lock, how often the lock is found taken.
	store   *contention
	retries atomic.Int64
	probes  atomic.Int64
	yields  atomic.Int64
	// committed is when this process last committed a write to the
	// shard, in Unix nanoseconds: a transaction that begins less than a
	// quarter of a transaction later may owe waiters a pause (giveWay).
	committed atomic.Int64
	// longest is the longest write transaction so far, in nanoseconds.
	longest atomic.Int64
	writes  atomic.Int64
	// probeFailures counts looks at a lock (F_GETLK) that failed.
	probeFailures atomic.Int64
	// queued is the moving average of how many times a batch found the
	// lock taken, in 1024ths: whether a batch hands off at once (handoff.go).
	queued atomic.Int64
}

// storeMax raises a to v, if v is more, without a lock.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// observe folds one transaction's lock hold time into the store's average.
func (w *waiter) observe(d time.Duration) {
	w.writes.Add(1)
	storeMax(&w.longest, int64(d))
	w.store.observeHold(d)
}

// pause is how long to sleep before looking again: with a probe, half a
// transaction; without one, where each look is a try of SQLite's lock, a
// whole one, then a half once it has waited that long. Jittered, so that
// waiters that began together look apart.
//
// Half a transaction is about how long the holder a waiter finds has left,
// and a waiter looks about twice per transaction it waits through. Looking
// more often, as the longest waiters once did (down to a 32nd of a
// transaction), bought no throughput on the EFS model: the lock passes to
// whichever waiter looks first after it frees, and with several waiting
// one of them looks soon; each look is a round trip, and they were most of
// what a contended decision cost (BENCHMARKS.md, "Calls per decision under
// contention").
//
// A transaction is at least as long as the wait a waiter has seen it
// through, so a waiter takes a quarter of its wait so far for a
// transaction's length when that is more than it has measured: a process
// that has not held the lock yet (a cold start, which measured nothing,
// and guesses a local disk's millisecond) looked every half millisecond
// through the EFS model's 100 ms transactions, about 130 looks a wait for
// the first decisions of 16 cold starts, and on two cores their looks'
// CPU was time the holder waited for. Now a wait of a second costs tens of
// looks, and a waiter notices the lock freed at most 3/16 of its wait
// (an eighth, jittered) and 50 ms late. That is less fair than it was: a
// waiter that has waited long looks less often than a newcomer, and may
// lose a freed lock to it. On one file hand-offs make up for it (the
// holder decides the waiter's request, handoff.go); a cross-shard batch,
// or one that found no slot, has only its looks.
func (w *waiter) pause(waited time.Duration, probing bool) time.Duration {
	hold := max(w.holdTime(), waited/4)
	d := hold
	switch {
	case probing:
		d = hold / 2
	case waited >= hold:
		d = hold / 2
	}
	d = time.Duration(float64(d) * (0.5 + rand.Float64()))
	return min(max(d, minPoll), maxPoll)
}

// pauseWithin is pause for a wait of budget, cut so that the last look
// comes a try's room (lastTry) before the budget's end, and whether to
// look again: not when less than minPoll is left before that. A wait that
// gave up when its next pause would overrun the budget gave up as much as
// a pause early (50 ms at a long wait's pace), and a lock freed then went
// to another process while this one's client was told the store was busy.
// A look at the budget's very end would find no time left for its try:
// waiting for this process's connection shares the budget (write).
func (w *waiter) pauseWithin(waited, budget time.Duration, probing bool) (time.Duration, bool) {
	left := budget - min(lastTry, budget/10) - waited
	if left < minPoll {
		return 0, false
	}
	return min(w.pause(waited, probing), left), true
}

func (w *waiter) holdTime() time.Duration { return w.store.holdTime() }

// Stats are counters of a store's activity since it was opened, summed
// over its shards.
type Stats struct {
	// BusyRetries counts transactions tried again after finding another
	// process holding the lock; Probes counts looks at the lock (F_GETLK)
	// that found it still held; Yields counts commits after which this
	// process gave way to waiting ones.
	BusyRetries int64
	Probes      int64
	Yields      int64
	// Writes counts committed write transactions, and LongestWrite is the
	// longest of them, from BEGIN to the end of COMMIT: the longest this
	// process held the lock (one prune batch, in a pruning process).
	Writes       int64
	LongestWrite time.Duration
	// ProbeFailures counts looks at the lock that failed (a descriptor
	// that is not open, an NFS error): each was taken for a free lock, and
	// SQLite's own lock tried instead.
	ProbeFailures int64
	// Batches counts committed transactions that decided attempts of one
	// shard, Batched the attempts they decided (a lone attempt is a batch
	// of one), and LargestBatch the most one of them decided: Batched over
	// Batches is how many decisions shared a transaction.
	Batches, Batched, LargestBatch int64
	// CrossShard counts committed decisions whose charges fell into several
	// shards, each one transaction over them all.
	CrossShard int64
	// HandedOff counts attempts of this process's that another decided,
	// in its transaction, while this one waited for the lock (a batch
	// answered so is not among Batches); Served, attempts of other
	// processes decided in this one's committed transactions (handoff.go).
	HandedOff, Served int64
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	var out Stats
	for _, sh := range s.shards {
		w := &sh.wait
		out.BusyRetries += w.retries.Load()
		out.Probes += w.probes.Load()
		out.Yields += w.yields.Load()
		out.Writes += w.writes.Load()
		out.LongestWrite = max(out.LongestWrite, time.Duration(w.longest.Load()))
		out.ProbeFailures += w.probeFailures.Load()
		out.Batches += sh.batch.batches.Load()
		out.Batched += sh.batch.decided.Load()
		out.LargestBatch = max(out.LargestBatch, sh.batch.largest.Load())
		out.CrossShard += sh.batch.across.Load()
		out.HandedOff += sh.batch.handed.Load()
		out.Served += sh.batch.served.Load()
	}
	return out
}

// isBusy reports whether err means another connection holds a lock.
func isBusy(err error) bool {
	return code(err) == sqlite3.SQLITE_BUSY || errors.Is(err, errHeld)
}

// errLockTimeout is returned when the lock was not granted within the budget.
var errLockTimeout = errors.New("database is locked: lock not granted within the busy timeout")

// do runs fn on the open database and retries it while another process
// holds the lock, until the budget or ctx runs out. Errors come back
// wrapped, with op and the path (see wrap).
//
// When a write finds it cannot write (SQLITE_READONLY: the file was deleted
// or replaced since it was opened, or was read-only when it was opened, and
// SQLite raises it before anything is written), the handle is dropped and
// the call tried once more on a fresh one, so the first request after such
// a fault clears succeeds. A rollback that found its super-journal already
// deleted is tried again too (see superJournalGone). Any other sign that
// the file is in trouble drops the handle for the next call.
//
// A call that waits watches the lock through the probe of the handle it
// found busy, and keeps its reference to that handle until it stops
// watching: a handle retired meanwhile (its file was replaced, say) is
// closed only then, so its probe's descriptors are never polled after
// they are closed, nor once their numbers belong to another file.
func (sh *shard) do(ctx context.Context, op string, fn func(*handle) error) error {
	return sh.doHanding(ctx, op, fn, nil)
}

// doHanding is do for a batch that hands its attempts to the holder of
// the lock while it waits (handoff.go), when ho is not nil: its request is
// written when the call first finds the lock taken, and its outcomes read
// each time the lock looks free, and once more when the wait runs out. A
// call whose outcomes are all found ends there, answered.
func (sh *shard) doHanding(ctx context.Context, op string, fn func(*handle) error, ho *handOff) error {
	start := time.Now()
	reopened := false
	gone := 0           // tries again after a rollback found its super-journal gone
	var watched *handle // the handle whose lock this call watches, referenced
	defer func() { sh.stopWatching(watched) }()
	for {
		h, err := sh.acquire(ctx)
		if err == nil {
			err = fn(h)
		}
		if err == nil {
			sh.release(h)
			return nil
		}
		if h != nil && needsReopen(err) {
			sh.drop(h)
			if code(err) == sqlite3.SQLITE_READONLY && !reopened {
				reopened = true
				sh.release(h)
				continue
			}
		}
		if superJournalGone(err, sh.path) && gone < superJournalRetries {
			gone++
			if h != nil {
				sh.release(h)
			}
			continue
		}
		if !isBusy(err) || sh.cfg.SQLiteBusyHandler {
			late := ho != nil && ho.settleLate(ctx, watchedOr(watched, h))
			if h != nil {
				sh.release(h)
			}
			if late {
				return nil
			}
			return sh.wrap(op, err)
		}
		watched = sh.watch(watched, h)
		if ho != nil {
			ho.busy()
		}
		err = sh.waitTurnHanding(ctx, watched.lockProbe(), start, ho)
		if ho != nil && ho.served(ctx, watched) {
			return nil
		}
		if err != nil {
			if ho != nil && ho.settleLate(ctx, watched) {
				return nil
			}
			if errors.Is(err, errLockTimeout) {
				err = fmt.Errorf("%w (%v)", errLockTimeout, sh.cfg.BusyTimeout)
			}
			return sh.wrap(op, err)
		}
	}
}

// watchedOr is the handle a call watches, or h if it watches none.
func watchedOr(watched, h *handle) *handle {
	if watched != nil {
		return watched
	}
	return h
}

// watch makes h, which a call found busy and holds a reference to, the
// handle it watches while it waits, in place of the one it watched (if
// another), and enters h's waiting room. A call that found the lock busy
// while opening has no handle yet, and goes on watching what it watched.
func (sh *shard) watch(watched, h *handle) *handle {
	switch {
	case h == nil:
		return watched
	case watched == h:
		sh.release(h) // the call already holds a reference to it
		return h
	}
	sh.stopWatching(watched)
	if h.probe != nil {
		h.probe.enter()
	}
	return h
}

// stopWatching leaves h's waiting room and gives back the reference the
// watch held.
func (sh *shard) stopWatching(h *handle) {
	if h == nil {
		return
	}
	if h.probe != nil {
		h.probe.leave()
	}
	sh.release(h)
}

// waitTurn sleeps until the lock looks free (with a probe) or for one
// pause (without), and fails when that would overrun the budget or ctx.
func (sh *shard) waitTurn(ctx context.Context, p *probe, start time.Time) error {
	return sh.waitTurnHanding(ctx, p, start, nil)
}

// waitTurnHanding is waitTurn for a batch that hands off (ho, if not nil):
// one that has waited two transactions' time writes its request.
func (sh *shard) waitTurnHanding(ctx context.Context, p *probe, start time.Time, ho *handOff) error {
	for {
		waited := time.Since(start)
		if ho != nil && waited >= 2*sh.wait.holdTime() {
			ho.waiting()
		}
		pause, ok := sh.wait.pauseWithin(waited, sh.cfg.BusyTimeout, p != nil)
		if !ok {
			return errLockTimeout
		}
		if err := backoff.Sleep(ctx, pause); err != nil {
			return err
		}
		if p == nil || !p.writerActive() {
			sh.wait.retries.Add(1)
			return nil
		}
		sh.wait.probes.Add(1)
	}
}

// lookFirst reports whether another process holds the lock, when the
// store's contention makes looking before BEGIN worth its call (see
// contention), and notes the look's answer.
func (sh *shard) lookFirst(h *handle) bool {
	if h.probe == nil || !sh.wait.store.likely() {
		return false
	}
	held := h.probe.writerActive()
	if held {
		sh.wait.store.observe(true)
	}
	return held
}

// giveWay pauses before a transaction on h that begins less than a
// quarter of a transaction after this process's last commit to the shard,
// when other processes wait for the lock, until that quarter has passed;
// it reports ctx's error if ctx ends first. Whether others wait costs a
// look at the waiting room (one F_GETLK), so it is asked only then, not
// after every commit: a process that comes back to the shard later than
// that owes nobody a pause, and with many shards that is most of them.
func (sh *shard) giveWay(ctx context.Context, h *handle) error {
	last := sh.wait.committed.Load()
	if last == 0 || h.probe == nil {
		return nil
	}
	until := time.Unix(0, last).Add(sh.wait.holdTime() / 4)
	if !time.Now().Before(until) || !h.probe.othersWaiting() {
		return nil
	}
	sh.wait.yields.Add(1)
	return backoff.Sleep(ctx, time.Until(until))
}

// write runs fn in an immediate transaction on one connection and commits,
// retrying the whole transaction while another process holds the lock.
// Only the COMMIT may wait inside SQLite, for readers, up to what is left of
// the budget (see commit).
func (sh *shard) write(ctx context.Context, op string, fn func(*sql.Tx, *handle) error) error {
	return sh.writeHanding(ctx, op, fn, nil)
}

// writeHanding is write for a batch that hands its attempts to the holder
// of the lock while it waits, when ho is not nil (see doHanding).
func (sh *shard) writeHanding(ctx context.Context, op string, fn func(*sql.Tx, *handle) error, ho *handOff) error {
	start := time.Now()
	first := true
	return sh.doHanding(ctx, op, func(h *handle) (err error) {
		if first {
			first = false
			if sh.lookFirst(h) {
				return errHeld
			}
			defer func() { sh.wait.store.observe(isBusy(err)) }()
		}
		// Waiting for this process's one connection is waiting for the
		// lock too, and shares its budget.
		connCtx, cancel := context.WithDeadline(ctx, start.Add(sh.cfg.BusyTimeout))
		defer cancel()
		conn, err := h.db.Conn(connCtx)
		if err != nil {
			return err
		}
		defer conn.Close()
		if err := sh.txOn(ctx, conn, h, start, func(tx *sql.Tx) error { return fn(tx, h) }); err != nil {
			return err
		}
		sh.wait.committed.Store(time.Now().UnixNano())
		return nil
	}, ho)
}

// txOn runs fn in an immediate transaction on conn, a connection of h's
// pool, after this process's courtesy pause, and commits it within the
// budget that began at start, the journal mode checked first when h asks
// for it. The transaction is rolled back when fn or the commit fails.
func (sh *shard) txOn(ctx context.Context, conn *sql.Conn, h *handle, start time.Time, fn func(*sql.Tx) error) error {
	if err := sh.giveWay(ctx, h); err != nil {
		return err
	}
	began := time.Now()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() // after Commit, a no-op
	if err := sh.checkJournalMode(ctx, tx, h); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	if err := sh.commit(ctx, conn, tx, h, start); err != nil {
		return err
	}
	h.ckpt.committed()
	sh.wait.observe(time.Since(began))
	return nil
}

// checkJournalMode reads the journal mode back in tx when h asks for it,
// once per FileCheckInterval: a process configured for WAL that opens the
// same file would otherwise switch it, and this store with it.
func (sh *shard) checkJournalMode(ctx context.Context, tx *sql.Tx, h *handle) error {
	if !h.checkMode.CompareAndSwap(true, false) {
		return nil
	}
	var mode string
	if err := tx.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, sh.cfg.JournalMode) {
		sh.drop(h) // reopening sets the configured mode again, or fails
		return fmt.Errorf("journal mode changed to %q under the store, not %q: %w", mode, sh.cfg.JournalMode, errJournalMode)
	}
	return nil
}

// commit commits tx. The COMMIT, which holds the lock and only waits for
// readers to finish, lets SQLite wait up to what is left of the budget
// since start; the connection is told not to wait again before it is
// released. In WAL a COMMIT waits for nobody (readers keep their snapshot,
// and the checkpoint after it is passive), so it commits without the two
// statements: in the local server they were 2% of its CPU, spent while
// the batch held the lock.
func (sh *shard) commit(ctx context.Context, conn *sql.Conn, tx *sql.Tx, h *handle, start time.Time) error {
	if !sh.cfg.SQLiteBusyHandler && !strings.EqualFold(sh.cfg.JournalMode, "WAL") {
		left := max(sh.cfg.BusyTimeout-time.Since(start), time.Millisecond)
		if _, err := tx.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(left.Milliseconds(), 10)); err != nil {
			return err
		}
		defer func() {
			// A connection left waiting SQLite's way would wait
			// unfairly from then on: rather open a fresh one.
			if _, err := conn.ExecContext(context.Background(), "PRAGMA busy_timeout = 0"); err != nil {
				sh.drop(h)
			}
		}()
	}
	return tx.Commit()
}
