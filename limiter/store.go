package limiter

import (
	"context"
	"time"
)

// Store keeps counters and audit records. Implementations are safe for
// simultaneous use by multiple goroutines, and several processes may share
// one store: every decision is atomic in the store itself.
type Store interface {
	// Allow counts one attempt under each of its charges and decides it, in
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

// A Charge is one policy an attempt must pass, with the key it counts under
// and what it costs.
type Charge struct {
	Policy Policy
	Key    string
	// Cost is how many requests the attempt counts as under the policy;
	// zero means 1.
	Cost int64
	// Tier is the tier the request names: the policy's tier of that name
	// sets its limit and burst; none, or a name the policy does not list,
	// leaves the policy's own (see Tier).
	Tier string
}

// units is c's cost: Cost, or 1 when it is not set.
func (c Charge) units() int64 { return max(c.Cost, 1) }

// Attempt is one request to be counted.
type Attempt struct {
	// Charges are the policies that apply, at least one. The first one's key
	// and window go into the audit record.
	Charges []Charge
	// Now is the instant of the request, read once by the caller.
	Now time.Time
	// Route and RequestID go into the audit record of an allowed attempt.
	Route     string
	RequestID string
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
