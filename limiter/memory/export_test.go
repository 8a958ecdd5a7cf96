package memory

import (
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
)

// ErrClosed is what calls after Close fail with.
var ErrClosed = errClosed

// Stored is what s holds, read from its tables directly as the SQLite
// store's tests read its file: the count of key's window of p that starts
// at start, and the audit records of key's window that starts there (as
// its attempts' first check counted them), in the order they were made.
func Stored(s *Store, p limiter.Policy, key string, start time.Time) (int64, []storetest.Audit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t == nil {
		return 0, nil
	}
	count := s.t.windows[window{decide.StoreKey(p, key), start.Unix()}].count
	var audit []storetest.Audit
	for _, r := range s.t.audit {
		if r.key == key && r.window == decide.FormatWindow(start) {
			audit = append(audit, storetest.Audit{CalledAt: r.calledAt, Route: r.route, RequestID: r.requestID, Cost: r.cost})
		}
	}
	return count, audit
}

// Held is how many counters, GCRA buckets and audit records s holds.
func Held(s *Store) (windows, buckets, audit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t == nil {
		return 0, 0, 0
	}
	return len(s.t.windows), len(s.t.buckets), len(s.t.audit)
}

// Sweeps is how many times s has swept.
func Sweeps(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.t == nil {
		return 0
	}
	return s.t.sweeps
}
