package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	sqlite3 "modernc.org/sqlite/lib"
)

// Waiting for the lock.
//
// SQLite's own busy handler polls with sleeps that grow from 1 ms to 100 ms.
// Between processes that is unfair: a process that has waited a while sleeps
// 100 ms between tries, while a newcomer tries again after 1 ms and takes the
// lock first. Under contention some environments then starve; with four
// processes on a local disk, cmd/loadtest saw one make 6 decisions in 3 s
// while another made 2,248, and its wait ran past the busy timeout.
//
// So the store waits itself. SQLite is told not to wait (busy_timeout 0)
// when a transaction begins, and the store retries at a steady pace tied to
// how long its transactions hold the lock: a newcomer first sleeps about one
// transaction's length, and a process that has waited longer than that
// polls twice as often, so old waiters are never outpaced by new ones and
// no wait outlasts the budget (BusyTimeout) or the request's deadline.
// Sleeps are jittered (0.5x to 1.5x) so that waiters do not poll in step.
// Polling faster than half a transaction bought no fairness in cmd/loadtest
// runs and cost throughput, as pollers took CPU from the lock holder.
//
// A transaction that holds the lock and only waits for readers to finish,
// at COMMIT, lets SQLite wait, up to the remaining budget: readers hold
// their lock for one short SELECT and cannot starve it, since SQLite admits
// no new readers once a writer is waiting to commit.

const (
	// minPoll and maxPoll bound one sleep between tries.
	minPoll = 50 * time.Microsecond
	maxPoll = 50 * time.Millisecond
	// initialHold is the guess of a transaction's length before one has
	// been measured: a local disk's fsyncs.
	initialHold = time.Millisecond
)

// waiter holds a store's lock-waiting state.
type waiter struct {
	// hold is a moving average of how long this process's write
	// transactions hold the lock, in nanoseconds.
	hold    atomic.Int64
	retries atomic.Int64
	// longest is the longest write transaction so far, in nanoseconds.
	longest atomic.Int64
	writes  atomic.Int64
}

// observe folds one transaction's lock hold time into the average.
func (w *waiter) observe(d time.Duration) {
	w.writes.Add(1)
	for {
		old := w.longest.Load()
		if int64(d) <= old || w.longest.CompareAndSwap(old, int64(d)) {
			break
		}
	}
	for {
		old := w.hold.Load()
		next := int64(d)
		if old > 0 {
			next = old + (int64(d)-old)/8
		}
		if w.hold.CompareAndSwap(old, next) {
			return
		}
	}
}

// pause is how long to sleep before the next try, having waited so far.
func (w *waiter) pause(waited time.Duration) time.Duration {
	hold := time.Duration(w.hold.Load())
	if hold <= 0 {
		hold = initialHold
	}
	if waited >= hold {
		hold /= 2
	}
	d := time.Duration(float64(hold) * (0.5 + rand.Float64()))
	return min(max(d, minPoll), maxPoll)
}

// Stats are counters of a store's activity since it was opened.
type Stats struct {
	// BusyRetries counts tries that found another process holding the lock
	// and slept before trying again.
	BusyRetries int64
	// Writes counts committed write transactions, and LongestWrite is the
	// longest of them, from BEGIN to the end of COMMIT: the longest this
	// process held the lock (one prune batch, in a pruning process).
	Writes       int64
	LongestWrite time.Duration
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	return Stats{
		BusyRetries:  s.wait.retries.Load(),
		Writes:       s.wait.writes.Load(),
		LongestWrite: time.Duration(s.wait.longest.Load()),
	}
}

// isBusy reports whether err means another connection holds a lock.
func isBusy(err error) bool {
	return code(err) == sqlite3.SQLITE_BUSY
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
// a fault clears succeeds. Any other sign that the file is in trouble drops
// the handle for the next call.
func (s *Store) do(ctx context.Context, now time.Time, op string, fn func(*handle) error) error {
	start := time.Now()
	reopened := false
	for {
		h, err := s.handle(ctx, now)
		if err == nil {
			err = fn(h)
		}
		if err == nil {
			return nil
		}
		if h != nil && needsReopen(err) {
			s.drop(h)
			if code(err) == sqlite3.SQLITE_READONLY && !reopened {
				reopened = true
				continue
			}
		}
		if !isBusy(err) || s.cfg.SQLiteBusyHandler {
			return s.wrap(op, err)
		}
		waited := time.Since(start)
		pause := s.wait.pause(waited)
		if waited+pause > s.cfg.BusyTimeout {
			return s.wrap(op, fmt.Errorf("%w (%v): %w", errLockTimeout, s.cfg.BusyTimeout, err))
		}
		s.wait.retries.Add(1)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return s.wrap(op, ctx.Err())
		case <-t.C:
		}
	}
}

// write runs fn in an immediate transaction on one connection and commits,
// retrying the whole transaction while another process holds the lock.
// Only the COMMIT may wait inside SQLite, for readers, up to what is left of
// the budget; the connection is told not to wait again before it is
// released.
func (s *Store) write(ctx context.Context, now time.Time, op string, fn func(*sql.Tx, *handle) error) error {
	start := time.Now()
	return s.do(ctx, now, op, func(h *handle) error {
		conn, err := h.db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		began := time.Now()
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback() // after Commit, a no-op
		if err := fn(tx, h); err != nil {
			return err
		}
		if !s.cfg.SQLiteBusyHandler {
			left := max(s.cfg.BusyTimeout-time.Since(start), time.Millisecond)
			if _, err := tx.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(left.Milliseconds(), 10)); err != nil {
				return err
			}
			defer conn.ExecContext(context.Background(), "PRAGMA busy_timeout = 0")
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		s.wait.observe(time.Since(began))
		return nil
	})
}
