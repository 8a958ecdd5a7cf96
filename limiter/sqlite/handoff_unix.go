//go:build unix

package sqlite

import (
	"os"
	"syscall"
)

// slotLocks reports whether byte-range locks are here for hand-offs.
const slotLocks = true

// lockSlot takes slot i of the request file f, an exclusive lock of its
// lock byte, if no other process holds it; it does not wait.
func lockSlot(f *os.File, i int) bool { return setLock(f, syscall.F_WRLCK, slotLockBase+int64(i)) }

func unlockSlot(f *os.File, i int) { setLock(f, syscall.F_UNLCK, slotLockBase+int64(i)) }

// lockServing takes a shared lock of the serving bytes, one per slot, and
// unlockServing lets it go; no waiter takes them, so it is granted at
// once. servingHeld reports whether another process holds the lock of
// slot i's serving byte: a holder is between reading the requests and the
// end of its COMMIT.
func lockServing(f *os.File) bool { return setLockRange(f, syscall.F_RDLCK, servingBase, handoffSlots) }

func unlockServing(f *os.File) { setLockRange(f, syscall.F_UNLCK, servingBase, handoffSlots) }

func servingHeld(f *os.File, i int) bool { return held(f, servingBase+int64(i), 1) }

// slotsTaken reports whether another process holds a slot of f: one
// F_GETLK over every slot's lock byte, which takes no lock.
func slotsTaken(f *os.File) bool { return held(f, slotLockBase, handoffSlots) }

func held(f *os.File, start, n int64) bool {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: start, Len: n}
	return syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk) == nil && lk.Type != syscall.F_UNLCK
}

func setLock(f *os.File, typ int16, off int64) bool { return setLockRange(f, typ, off, 1) }

func setLockRange(f *os.File, typ int16, off, n int64) bool {
	lk := syscall.Flock_t{Type: typ, Whence: 0, Start: off, Len: n}
	return syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk) == nil
}
