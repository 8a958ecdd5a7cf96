package sqlite

import (
	"os"
	"time"
)

// SetOpenHook makes f run at the points of every open where another process
// may act ("open", "pragmas", "migrated"), until the returned func restores
// none.
func SetOpenHook(f func(stage, path string)) (restore func()) {
	testHookOpen = f
	return func() { testHookOpen = nil }
}

// SetCommitHook makes f run before every COMMIT of decisions (a batch, or
// a cross-shard transaction, with the path of its first file); an error
// it returns fails the transaction. The returned func restores none.
func SetCommitHook(f func(path string) error) (restore func()) {
	testHookCommit = f
	return func() { testHookCommit = nil }
}

// Queued is how many decisions wait for shard i's transaction in flight.
func Queued(s *Store, i int) int {
	b := &s.shards[i].batch
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// LingerFor is how long a turn lingers after a batch of several when a
// transaction holds the lock for hold; MinLinger is the shortest it does.
var LingerFor, MinLinger = lingerFor, minLinger

// SetServedHook sets testHookServed until restore is called.
func SetServedHook(f func(path string, n int)) (restore func()) {
	old := testHookServed
	testHookServed = f
	return func() { testHookServed = old }
}

// WaitingRequests is how many slots of the request file of the database
// at path hold a request.
func WaitingRequests(path string) int {
	b, err := os.ReadFile(requestPath(path))
	if err != nil {
		return 0
	}
	n := 0
	for i := 0; i < len(b); i += slotSize {
		if _, ok := parseSlot(b[i:min(i+slotSize, len(b))]); ok {
			n++
		}
	}
	return n
}

// SetBusy makes s's first shard look busy: its write transactions
// measured to hold the lock for hold (as on a machine where they take that
// long), and a request queued for it just now.
func SetBusy(s *Store, hold time.Duration) {
	s.shards[0].wait.store.hold.Store(int64(hold))
	s.shards[0].batch.queuedAt.Store(time.Now().UnixNano())
}

// YieldsFirst is yieldsFirst, and ContendedWithin how recently a request
// must have queued for it.
var YieldsFirst, ContendedWithin = yieldsFirst, contendedWithin
