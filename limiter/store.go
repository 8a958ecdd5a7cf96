package limiter

import (
	"context"
	"errors"
	"time"
)

// Store keeps counters and audit records. Implementations are safe for
// simultaneous use by multiple goroutines, and several processes may share
// one store: every decision is atomic in the store itself.
type Store interface {
	// Allow counts one attempt and decides it, in one write transaction: the
	// increment, and the audit record when the attempt is allowed, commit
	// together or not at all.
	Allow(ctx context.Context, a Attempt) (Decision, error)
	// Usage reads key's counter for the window containing now. It never writes.
	Usage(ctx context.Context, p Policy, key string, now time.Time) (Usage, error)
	// Prune deletes counters whose window ended more than one window length
	// before now, for each row's own window length, and audit records made
	// before auditBefore (none when auditBefore is zero).
	Prune(ctx context.Context, now, auditBefore time.Time) (Pruned, error)
	// Close releases the store.
	Close() error
}

// Attempt is one request to be counted.
type Attempt struct {
	Policy Policy
	Key    string
	// Now is the instant of the request, read once by the caller.
	Now time.Time
	// Route and RequestID go into the audit record of an allowed attempt.
	Route     string
	RequestID string
}

// AuditBefore is the audit cutoff at now for a retention: audit records made
// before it may be deleted. Zero retention keeps them forever and gives the
// zero time, which Prune reads as "keep".
func AuditBefore(now time.Time, retention time.Duration) time.Time {
	if retention <= 0 {
		return time.Time{}
	}
	return now.Add(-retention)
}

// Pruned reports what a Prune deleted.
type Pruned struct {
	Windows int64 `json:"windows_deleted"`
	Audit   int64 `json:"audit_deleted"`
}

// ErrUnavailable marks store failures that may clear by themselves: the file
// or its directory is missing or read-only, the lock was not granted in time,
// an I/O error. Callers answer them with their fail mode.
var ErrUnavailable = errors.New("store unavailable")
