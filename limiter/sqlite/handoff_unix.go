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

// lockShared takes a shared lock of byte off of f, and unlockByte lets it
// go; no waiter takes that byte, so it is granted at once.
func lockShared(f *os.File, off int64) bool { return setLock(f, syscall.F_RDLCK, off) }

func unlockByte(f *os.File, off int64) { setLock(f, syscall.F_UNLCK, off) }

// slotsTaken reports whether another process holds a slot of f: one
// F_GETLK over every slot's lock byte, which takes no lock.
func slotsTaken(f *os.File) bool {
	lk := syscall.Flock_t{Type: syscall.F_RDLCK, Whence: 0, Start: slotLockBase, Len: handoffSlots}
	return syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk) == nil && lk.Type != syscall.F_UNLCK
}

func setLock(f *os.File, typ int16, off int64) bool {
	lk := syscall.Flock_t{Type: typ, Whence: 0, Start: off, Len: 1}
	return syscall.FcntlFlock(f.Fd(), syscall.F_SETLK, &lk) == nil
}
