//go:build !unix

package sqlite

import "os"

// slotLocks reports whether byte-range locks are here for hand-offs: not
// on this platform, where batches wait for the lock as they did before.
const slotLocks = false

func lockSlot(*os.File, int) bool     { return false }
func unlockSlot(*os.File, int)        {}
func lockShared(*os.File, int64) bool { return false }
func unlockByte(*os.File, int64)      {}
