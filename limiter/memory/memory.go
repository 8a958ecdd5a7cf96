package memory

import (
	"context"
	"errors"
	"sync"

	"github.com/ft251/ratelimit/limiter"
)

// Store is a limiter.Store in this process's memory. It is safe for
// simultaneous use by multiple goroutines: one mutex makes each call
// atomic, a decision's reads, increments and audit record together. Its
// zero value is an empty store, ready to use, as New returns one.
type Store struct {
	mu     sync.Mutex
	closed bool
	t      *tables // nil until the first call needs it, and after Close
}

var _ limiter.Store = (*Store)(nil)

// tables is what a store keeps, laid out as the SQLite store's tables
// are, so that each operation finds its rows as that one does: by the
// policy's store key (decide.StoreKey) and window.
type tables struct {
	windows map[window]counter
	// longest is, by namespace, the longest window of the policies that
	// counted in it: sweep keeps each counter of the namespace that long
	// (policies that share a namespace, which a Limiter refuses and a
	// store takes, count in each other's counters, as in a SQLite file
	// that nobody prunes).
	longest   map[string]int64
	buckets   map[string]bucket
	overrides map[string]limiter.Override
	// audit are the audit records, in the order they were made.
	audit []record
	// swept is when, on the decisions' clock (Unix seconds), the store
	// last forgot what could no longer matter (sweep); recent are the
	// instants of the last decisions, decided how many there were, and
	// since how many since the sweep (maybeSweep).
	swept          int64
	recent         [3]int64
	decided, since int
	sweeps         int // how many, for the tests
}

// window names a window's counter: its policy's store key, and its start
// in whole Unix seconds (decide.WindowStart).
type window struct {
	key   string
	start int64
}

// counter is one window's count, and the length of the window it counts,
// so that Prune honours each policy's own window (as a row keeps the one
// it was inserted with).
type counter struct {
	count, seconds int64
}

// bucket is a GCRA bucket: its TAT in Unix nanoseconds, one instant on the
// wall clock as the other stores keep it, and the emission interval it was
// written with, so that a change of the key's rate rescales it.
type bucket struct {
	tat      int64
	emission int64
}

// record is an audit record, with the client key exactly and the times
// written as the other stores write them (decide.WindowLayout,
// decide.CalledAtLayout).
type record struct {
	key, window, calledAt string
	route, requestID      string
	cost                  int64
	// until is when (Unix seconds) the counter it audits may go, and the
	// record with it: its window's end and one window more.
	until int64
}

// errClosed is what every call after Close fails with. It does not wrap
// limiter.ErrUnavailable: a closed store does not open again by itself,
// and what it held is gone.
var errClosed = errors.New("memory: the store is closed")

// New returns an empty store.
func New() *Store { return new(Store) }

// Ready reports nil: the store's data is in the process, never out of
// reach. After Close, it reports the store closed.
func (s *Store) Ready(ctx context.Context) error {
	return s.do(ctx, func(*tables) error { return nil })
}

// Close forgets everything the store holds; every call after it fails, and
// says the store is closed. Closing it again does nothing.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed, s.t = true, nil
	return nil
}

// do runs fn on the store's tables, holding its mutex, unless ctx has
// ended (nothing is then read or written) or the store is closed. The
// mutex is held for as long as fn takes, which for a decision is some map
// lookups: a caller waiting for it does not watch ctx.
func (s *Store) do(ctx context.Context, fn func(*tables) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errClosed
	}
	if s.t == nil {
		s.t = &tables{windows: map[window]counter{}, buckets: map[string]bucket{}, overrides: map[string]limiter.Override{}}
	}
	return fn(s.t)
}
