package sqlite

import (
	"errors"
	"sync/atomic"
	"time"
)

// contention is a store's estimate of how likely a write transaction is to
// find another process holding its file's lock, over all its shards (a
// process touches each of many shards too seldom to learn each one's).
//
// It decides whether a transaction looks at the lock (one F_GETLK) before
// it begins: a BEGIN IMMEDIATE that finds the lock taken costs about eight
// file-system calls (SQLite takes and drops its shared lock, looks for a
// hot journal, reads the change counter and the size, fails to take its
// reserved lock), each a round trip on EFS, where the look costs one. A
// lone process never finds the lock taken, and never looks first.
//
// It also learns how long this process's write transactions hold the lock,
// over all shards alike, since they share one file system. (Learnt per
// shard, as it was, most shards of a process spread over 16 or 64 had seen
// no transaction, and their waiters paced their looks at the lock by
// initialHold, a local disk's millisecond, where EFS holds it for a
// hundred: they looked hundreds of times a wait.)
type contention struct {
	// busy is a moving average of first tries that found the lock taken,
	// in units of 1/busyOne.
	busy atomic.Int64
	// hold is a moving average of how long this process's write
	// transactions hold the lock, in nanoseconds.
	hold atomic.Int64
	// read is a moving average of how long a read of handed-off outcomes
	// takes (handoff.go), in nanoseconds: an average, not the longest, so
	// that one read slowed by a stall does not stretch every late read
	// after it.
	read atomic.Int64
}

// observeRead folds one read of handed-off outcomes into the average.
func (c *contention) observeRead(d time.Duration) { fold(&c.read, int64(d), true) }

// readBound is how long a read of handed-off outcomes may take once its
// call has no time left (its deadline passed, its client gone): twice such
// a read, or twice a transaction, 100 ms at least, and never more than
// budget.
func (c *contention) readBound(budget time.Duration) time.Duration {
	return min(max(2*time.Duration(c.read.Load()), 2*c.holdTime(), 100*time.Millisecond), budget)
}

// observeHold folds one transaction's lock hold time into the average.
func (c *contention) observeHold(d time.Duration) { fold(&c.hold, int64(d), true) }

// fold moves the moving average in a an eighth of the way to sample. With
// seed, an average not begun (0) starts at sample.
func fold(a *atomic.Int64, sample int64, seed bool) {
	for {
		old := a.Load()
		next := old + (sample-old)/8
		if seed && old == 0 {
			next = sample
		}
		if a.CompareAndSwap(old, next) {
			return
		}
	}
}

// holdTime is the average hold, or initialHold before one is measured.
func (c *contention) holdTime() time.Duration {
	if hold := time.Duration(c.hold.Load()); hold > 0 {
		return hold
	}
	return initialHold
}

const (
	busyOne = 1 << 16
	// lookFirstAbove is the rate of busy first tries above which looking
	// first saves calls: a look costs one, a failed BEGIN about eight.
	lookFirstAbove = busyOne / 8
)

// observe folds in whether a transaction's first try found the lock taken.
func (c *contention) observe(busy bool) {
	sample := int64(0)
	if busy {
		sample = busyOne
	}
	fold(&c.busy, sample, false)
}

// likely reports whether a transaction should look at the lock first.
func (c *contention) likely() bool { return c.busy.Load() > lookFirstAbove }

// errHeld is what a write that looked at the lock first, and found another
// process holding it, fails with: it waits as for SQLITE_BUSY (isBusy).
var errHeld = errors.New("database is locked by another process")
