//go:build linux

package sqlite

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
)

// ofdLock takes a lock of typ on [start, start+n) of a new open file
// description of path: an open file description lock conflicts with this
// process's own POSIX locks, as another process's would, so one test
// process can play the other process.
func ofdLock(t *testing.T, path string, typ int16, start, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	lk := syscall.Flock_t{Type: typ, Start: start, Len: n}
	if err := syscall.FcntlFlock(f.Fd(), 37 /* F_OFD_SETLK */, &lk); err != nil {
		t.Fatal(err)
	}
}

// newProbe is a probe of a new, empty file, and the count of its failed
// looks.
func newProbe(t *testing.T) (string, *probe, *atomic.Int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	failed := new(atomic.Int64)
	p, err := openProbe(path, failed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return path, p, failed
}

// TestAReaderIsNoWriter: a process taking its SHARED lock holds a read lock
// on PENDING for a moment (os_unix.c). A waiter that took that for a writer
// went on waiting while others only read: sixteen cold starts served by one
// holder then read their outcomes one after another. A write lock on
// RESERVED (a writer) or PENDING (a commit) is one.
func TestAReaderIsNoWriter(t *testing.T) {
	path, p, failed := newProbe(t)
	if p.writerActive() {
		t.Fatal("a writer seen where no lock is held")
	}
	ofdLock(t, path, syscall.F_RDLCK, pendingByte, 1)
	if p.writerActive() {
		t.Error("a reader's read lock on PENDING taken for a writer")
	}
	ofdLock(t, path, syscall.F_WRLCK, reservedByte, 1)
	if !p.writerActive() {
		t.Error("a write lock on RESERVED not seen")
	}
	if failed.Load() != 0 {
		t.Errorf("%d looks failed", failed.Load())
	}
}

// TestACommitIsAWriter: a write lock on PENDING, as a commit takes it, is
// a writer.
func TestACommitIsAWriter(t *testing.T) {
	path, p, _ := newProbe(t)
	ofdLock(t, path, syscall.F_WRLCK, pendingByte, 1)
	if !p.writerActive() {
		t.Error("a write lock on PENDING not seen")
	}
}

// TestARollbackIsAWriter: a process that finds a hot journal (another
// crashed mid-commit) rolls it back holding EXCLUSIVE, taken straight from
// SHARED: a write lock on the SHARED range, with no RESERVED or PENDING
// (os_unix.c). A waiter that took that for a free lock tried SQLite's lock
// again and again through the rollback's fsyncs. Readers' read locks on
// that range are no writer.
func TestARollbackIsAWriter(t *testing.T) {
	path, p, _ := newProbe(t)
	ofdLock(t, path, syscall.F_RDLCK, sharedFirst, sharedSize)
	if p.writerActive() {
		t.Error("readers' read locks on the SHARED range taken for a writer")
	}
	path, p, _ = newProbe(t)
	ofdLock(t, path, syscall.F_WRLCK, sharedFirst, sharedSize)
	if !p.writerActive() {
		t.Error("a write lock on the SHARED range, a rollback's, not seen")
	}
}
