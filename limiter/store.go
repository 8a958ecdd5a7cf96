package limiter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Store keeps counters and audit records. Implementations are safe for
// simultaneous use by multiple goroutines, and several processes may share
// one store: every decision is atomic in the store itself.
type Store interface {
	// Allow counts one attempt under each of its checks and decides it, in
	// one write transaction: the increments, and the audit record when the
	// attempt is allowed, commit together or not at all.
	Allow(ctx context.Context, a Attempt) (Outcome, error)
	// Usage reads key's standing under p at now, with its override if it
	// has one. It never writes.
	Usage(ctx context.Context, p Policy, key string, now time.Time) (Usage, error)
	// Prune deletes counters whose window ended more than one window length
	// before now, for each row's own window, GCRA buckets that have drained
	// by now, and audit records made before auditBefore (none when
	// auditBefore is zero). Overrides stay.
	Prune(ctx context.Context, now, auditBefore time.Time) (Pruned, error)
	// SetOverride stores o as key's override under p, replacing any, and
	// returns the one it replaced (nil if none). The next decision of every
	// process applies it.
	SetOverride(ctx context.Context, p Policy, key string, o Override) (before *Override, err error)
	// Override reads key's override under p; nil when there is none.
	Override(ctx context.Context, p Policy, key string) (*Override, error)
	// DeleteOverride removes key's override under p, returning it (nil if
	// there was none): the key is back to the policy's limit.
	DeleteOverride(ctx context.Context, p Policy, key string) (before *Override, err error)
	// Reset forgets key's counts under p as of now, so that its next
	// attempt passes as a fresh key's would: the current and previous
	// windows' counters, or a GCRA policy's bucket. Audit records stay.
	Reset(ctx context.Context, p Policy, key string, now time.Time) error
	// Ready reports whether the store can serve now, reaching its data to
	// find out: nil; an error wrapping ErrUnavailable, which may clear by
	// itself (the store keeps trying on every call, so a process may start
	// and answer with its fail mode meanwhile); or any other error, which
	// will not clear (a file that is not a database, a schema newer than
	// this binary), and should stop the process.
	Ready(ctx context.Context) error
	// Close releases the store.
	Close() error
}

// Check is one policy an attempt must pass, with the key it counts under
// and what it costs.
type Check struct {
	Policy Policy
	Key    string
	// Cost is how many requests the attempt counts as under the policy;
	// zero means 1.
	Cost int64
}

// Units is c's cost: Cost, or 1 when it is not set.
func (c Check) Units() int64 { return max(c.Cost, 1) }

// Attempt is one request to be counted.
type Attempt struct {
	// Checks are the policies that apply, at least one. The first one's key
	// and window go into the audit record.
	Checks []Check
	// Now is the instant of the request, read once by the caller.
	Now time.Time
	// Route and RequestID go into the audit record of an allowed attempt.
	Route     string
	RequestID string
}

// Validate reports what is wrong with a's checks, or nil.
func (a Attempt) Validate() error {
	if len(a.Checks) == 0 {
		return errors.New("an attempt has no checks")
	}
	for _, c := range a.Checks {
		if err := c.Policy.Validate(); err != nil {
			return err
		}
		if c.Cost < 0 || c.Cost > MaxLimit {
			return fmt.Errorf("policy %q: cost %d is not from 1 to %d", c.Policy.Name, c.Cost, int64(MaxLimit))
		}
	}
	return nil
}

// CalledAtLayout is how an audit record's time is written: UTC with
// milliseconds, fixed width so that it sorts as text.
const CalledAtLayout = "2006-01-02T15:04:05.000Z"

// AuditBefore is the audit cutoff at now for a retention: audit records made
// before it may be deleted. Zero retention keeps them forever and gives the
// zero time, which Prune reads as "keep".
func AuditBefore(now time.Time, retention time.Duration) time.Time {
	if retention <= 0 {
		return time.Time{}
	}
	return now.Add(-retention)
}

// Pruned reports what a Prune deleted: expired window counters, GCRA
// buckets that have drained (as full as a fresh key's), old audit records,
// and files a store's crashed writers left behind that nothing else would
// delete (SQLite's super-journals; zero but after crashes, and left out of
// the JSON then, so that a prune's result reads as it always did).
type Pruned struct {
	Windows       int64 `json:"windows_deleted"`
	Buckets       int64 `json:"buckets_deleted"`
	Audit         int64 `json:"audit_deleted"`
	SuperJournals int64 `json:"super_journals_deleted,omitempty"`
}

// LogLevel is the level at which to log a prune that reported p and failed
// with err: error when it failed, info when it deleted something, and debug
// when it deleted nothing, so that a schedule that mostly finds nothing to
// do (every minute, say) does not fill the logs with lines that say so.
func (p Pruned) LogLevel(err error) slog.Level {
	switch {
	case err != nil:
		return slog.LevelError
	case p == Pruned{}:
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// ErrUnavailable marks store failures that may clear by themselves: the file
// or its directory is missing or read-only, the lock was not granted in time,
// an I/O error. Callers answer them with their fail mode.
var ErrUnavailable = errors.New("store unavailable")
