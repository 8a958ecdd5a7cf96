//go:build unix

package sqlite

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// SQLite's lock bytes in the database file (os_unix.c): a writer holds
// RESERVED while it writes, and PENDING then the SHARED range while it
// commits; a reader holds a read lock on the SHARED range.
const (
	pendingByte  = 0x40000000
	reservedByte = pendingByte + 1
	sharedFirst  = pendingByte + 2
	sharedSize   = 510
)

// probe watches other processes' hold on the database lock without taking
// SQLite's locks, and keeps a waiting room: a side file on which processes
// waiting for the lock hold a shared lock, so that the process holding it
// can tell it is wanted.
//
// Both are POSIX record locks, which belong to the process, not the
// descriptor: closing any descriptor of the database file drops every lock
// this process holds on it, SQLite's included. So the probe's descriptor
// stays open as long as SQLite's connection, and is closed after it.
type probe struct {
	db   *os.File // the database, for F_GETLK only
	room *os.File // path + "-wait"

	mu      sync.Mutex
	waiting int // goroutines of this process in the waiting room

	// failed counts looks at a lock that failed, in the store's Stats.
	failed *atomic.Int64
}

func openProbe(path string, failed *atomic.Int64) (*probe, error) {
	db, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	room, err := os.OpenFile(path+"-wait", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &probe{db: db, room: room, failed: failed}, nil
}

// close must come after the SQLite connection on the same file is closed.
func (p *probe) close() {
	p.db.Close()
	p.room.Close()
}

// held reports whether another process holds a lock that conflicts with
// a lock of kind (F_RDLCK, F_WRLCK) on [start, start+n) of f: asked as a
// read lock, only another's write lock conflicts. One F_GETLK: a round
// trip on NFS, and no lock taken. A probe that fails says nothing about
// the lock: false, so that the caller tries SQLite's own lock, which
// knows; the failure is counted.
func (p *probe) held(f *os.File, kind int16, start, n int64) bool {
	lk := syscall.Flock_t{Type: kind, Whence: 0, Start: start, Len: n}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		p.failed.Add(1)
		return false
	}
	return lk.Type != syscall.F_UNLCK
}

// writerActive reports whether another process is writing or committing:
// a write lock on RESERVED, PENDING or the SHARED range. The SHARED range
// counts because a process that rolls back a hot journal (another crashed
// mid-commit) takes EXCLUSIVE straight from SHARED, a write lock on that
// range alone; SQLite takes PENDING only on the way to SHARED, or to
// EXCLUSIVE from RESERVED (os_unix.c). It asks as a reader would, because
// a reader holds a read lock on PENDING for a moment while it takes its
// SHARED lock (os_unix.c), and a reader is no writer: asked as a writer
// would, every process reading made the others' waits go on. Sixteen cold
// starts served by one holder then read their outcomes one after another,
// each waiting while the others' reads took their locks (BENCHMARKS.md,
// "Cold starts on a new file").
func (p *probe) writerActive() bool {
	return p.held(p.db, syscall.F_RDLCK, pendingByte, sharedFirst+sharedSize-pendingByte)
}

// othersWaiting reports whether another process is in the waiting room,
// where each holds a read lock.
func (p *probe) othersWaiting() bool { return p.held(p.room, syscall.F_WRLCK, 0, 1) }

// enter puts this process in the waiting room; leave takes it out once no
// goroutine of it waits any more. Errors only cost fairness, not
// correctness, and are ignored.
func (p *probe) enter() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting++; p.waiting == 1 {
		lk := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: 0, Start: 0, Len: 1}
		syscall.FcntlFlock(p.room.Fd(), syscall.F_SETLK, &lk)
	}
}

func (p *probe) leave() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting--; p.waiting == 0 {
		lk := syscall.Flock_t{Type: syscall.F_UNLCK, Whence: 0, Start: 0, Len: 1}
		syscall.FcntlFlock(p.room.Fd(), syscall.F_SETLK, &lk)
	}
}
