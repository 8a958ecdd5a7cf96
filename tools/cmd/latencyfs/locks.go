package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Open-file-description lock commands (fcntl(2)); the syscall package lacks
// them.
const (
	fOFDGetlk  = 36 // F_OFD_GETLK
	fOFDSetlk  = 37 // F_OFD_SETLK
	fOFDSetlkw = 38 // F_OFD_SETLKW
)

// fileID names a backing file by device and inode, which stay the same
// across renames and while any handle is open.
type fileID struct{ dev, ino uint64 }

// lockTable gives POSIX record locks taken through the mount their POSIX
// semantics, held in the host kernel on the backing file.
//
// The kernel forwards each fcntl lock with an owner: the locking process's
// file table for F_SETLK (or the open file for F_OFD_SETLK). POSIX locks
// belong to that owner, not to a descriptor: a process never conflicts with
// itself through two descriptors, and closing any descriptor of the file
// drops all its locks on it (which is why SQLite never closes a database file
// while it holds a lock). go-fuse's loopback instead takes an
// open-file-description lock on each FUSE handle, so one process holding the
// file open twice would conflict with itself, and a close would leave its
// locks in place.
//
// lockTable reopens the backing file once per (file, owner) and takes that
// owner's locks on its own open file description: descriptions conflict with
// each other as owners should, a description merges and splits its own
// ranges as POSIX does for one process, and because the locks live in the
// host kernel they also conflict with other mounts of the same directory and
// with processes that use the directory directly. The kernel sends FLUSH
// with the owner on every close(2); dropOwner then closes that owner's
// description, releasing all its locks as close(2) does on a local file.
//
// lockTable is safe for simultaneous use.
type lockTable struct {
	mu    sync.Mutex
	files map[fileID]*lockedFile

	// flushOwners carries each FLUSH's lock owner from rawFS, which sees it,
	// to file.Flush, which go-fuse calls without it. The key is the
	// request's cancel channel, unique to the request while it runs.
	flushOwners sync.Map // <-chan struct{} → uint64
}

// lockedFile is one backing file's lock state.
type lockedFile struct {
	handles int                 // FUSE handles open on the file
	owners  map[uint64]*os.File // each lock owner's open file description
}

func newLockTable() *lockTable {
	return &lockTable{files: make(map[fileID]*lockedFile)}
}

// opened notes a new FUSE handle on the file.
func (t *lockTable) opened(id fileID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lf := t.files[id]
	if lf == nil {
		lf = &lockedFile{owners: make(map[uint64]*os.File)}
		t.files[id] = lf
	}
	lf.handles++
}

// released notes that a FUSE handle on the file is gone. When it was the
// last, no process has the file open through the mount, so no lock can
// remain: any owner description still open (an F_OFD_SETLK owner, which
// FLUSH does not name) is closed.
func (t *lockTable) released(id fileID) {
	t.mu.Lock()
	lf := t.files[id]
	if lf == nil {
		t.mu.Unlock()
		return
	}
	lf.handles--
	if lf.handles > 0 {
		t.mu.Unlock()
		return
	}
	delete(t.files, id)
	t.mu.Unlock()
	for _, f := range lf.owners {
		f.Close()
	}
}

// ownerFile returns owner's description of the file, opening one from fd
// (a descriptor of the same file) when create is set and there is none.
func (t *lockTable) ownerFile(id fileID, owner uint64, fd int, create bool) (*os.File, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	lf := t.files[id]
	if lf == nil {
		return nil, syscall.EBADF // no handle open: cannot happen for a request on a handle
	}
	if f := lf.owners[owner]; f != nil || !create {
		return f, nil
	}
	f, err := reopen(fd)
	if err != nil {
		return nil, err
	}
	lf.owners[owner] = f
	return f, nil
}

// reopen opens a new description of the file that fd refers to, through
// /proc so that it is the same file whatever happened to its name. It asks
// for read and write so that the description can hold both kinds of lock
// (the kernel has already checked that the caller's own descriptor may take
// the lock it asks for), and settles for read-only on a read-only file.
func reopen(fd int) (*os.File, error) {
	p := fmt.Sprintf("/proc/self/fd/%d", fd)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		f, err = os.OpenFile(p, os.O_RDONLY, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("reopen for locking: %w", err)
	}
	return f, nil
}

// flushOwner returns the lock owner of the FLUSH request that ctx belongs
// to, as noted by rawFS.
func (t *lockTable) flushOwner(ctx context.Context) (uint64, bool) {
	v, ok := t.flushOwners.Load(ctx.Done())
	if !ok {
		return 0, false
	}
	return v.(uint64), true
}

// dropOwner releases all of owner's locks on the file by closing its
// description, as close(2) of any descriptor releases a process's locks.
func (t *lockTable) dropOwner(id fileID, owner uint64) {
	t.mu.Lock()
	var f *os.File
	if lf := t.files[id]; lf != nil {
		f = lf.owners[owner]
		delete(lf.owners, owner)
	}
	t.mu.Unlock()
	if f != nil {
		f.Close()
	}
}

// getlk tests lk for owner: out is the first conflicting lock held by
// another owner, or F_UNLCK when there is none. A description that holds
// none of owner's locks (fd, the caller's own handle, when owner has none)
// sees every lock as another's. The holder's pid is not known (the host
// kernel reports open-file-description locks with pid -1), so out.Pid is 0.
func (t *lockTable) getlk(id fileID, fd int, owner uint64, lk *fuse.FileLock, out *fuse.FileLock) syscall.Errno {
	f, err := t.ownerFile(id, owner, fd, false)
	if err != nil {
		return errnoOf(err)
	}
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	if f != nil {
		err = withFd(f, func(fd int) error { return syscall.FcntlFlock(uintptr(fd), fOFDGetlk, &flk) })
	} else {
		err = syscall.FcntlFlock(uintptr(fd), fOFDGetlk, &flk)
	}
	if err != nil {
		return errnoOf(err)
	}
	out.FromFlockT(&flk)
	out.Pid = 0
	return 0
}

// setlk takes, changes or drops owner's lock lk. With wait, a conflicting
// lock is waited for until it goes or the request is interrupted (EINTR).
// The wait polls instead of sleeping in F_OFD_SETLKW, so that an
// interrupted caller never leaves behind a server thread that later takes
// a lock for a process that stopped waiting. Deadlocks between waiters are
// not detected (F_SETLKW would report EDEADLK): SQLite never waits in the
// kernel, it polls with F_SETLK.
func (t *lockTable) setlk(ctx context.Context, id fileID, fd int, owner uint64, lk *fuse.FileLock, wait bool) syscall.Errno {
	unlock := lk.Typ == syscall.F_UNLCK
	f, err := t.ownerFile(id, owner, fd, !unlock)
	if err != nil {
		return errnoOf(err)
	}
	if f == nil {
		return 0 // unlocking what was never locked
	}
	var flk syscall.Flock_t
	lk.ToFlockT(&flk)
	try := func() error {
		return withFd(f, func(fd int) error { return syscall.FcntlFlock(uintptr(fd), fOFDSetlk, &flk) })
	}
	return errnoOf(poll(ctx, try, wait))
}

// poll calls try, and while it reports a conflict and wait is set, calls it
// again after a growing pause until it succeeds or ctx ends.
func poll(ctx context.Context, try func() error, wait bool) error {
	pause := 50 * time.Microsecond
	for {
		err := try()
		if !wait || (err != syscall.EAGAIN && err != syscall.EACCES && err != syscall.EWOULDBLOCK) {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return syscall.EINTR
		case <-t.C:
		}
		pause = min(2*pause, 5*time.Millisecond)
	}
}

// flock takes or drops a BSD flock(2) lock, whose owner is the open file:
// one FUSE handle, so the handle's own descriptor holds it, and closing the
// handle at RELEASE drops it, as closing the last descriptor does locally.
func flock(ctx context.Context, fd int, lk *fuse.FileLock, wait bool) syscall.Errno {
	var how int
	switch lk.Typ {
	case syscall.F_RDLCK:
		how = syscall.LOCK_SH
	case syscall.F_WRLCK:
		how = syscall.LOCK_EX
	case syscall.F_UNLCK:
		how = syscall.LOCK_UN
	default:
		return syscall.EINVAL
	}
	try := func() error { return syscall.Flock(fd, how|syscall.LOCK_NB) }
	return errnoOf(poll(ctx, try, wait))
}

// withFd runs fn on f's descriptor.
func withFd(f *os.File, fn func(fd int) error) error {
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := sc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// errnoOf turns an error from a system call into the errno FUSE returns.
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EIO
}
