package memory

import (
	"context"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// sweepEvery is how often, in seconds of the decisions' clock, a decision
// makes the store forget what can no longer matter (sweep): at most once a
// minute, a walk of what it keeps, so that a server that never calls
// Prune does not grow with every window and request it ever saw.
const sweepEvery = 60

// maybeSweep sweeps, after a decision at now (Unix seconds), when the
// decisions' clock has moved on a minute since the last sweep. The
// instants are the callers' (Request.At, a clock that steps), so it goes
// by the earlier of this decision's and the one before's: one decision
// hours ahead does not forget the live counters of every other key (two
// in a row must say the time has come). A clock that steps back a minute
// or more starts the sweeps again from where it is, rather than stopping
// them until it is back.
func (t *tables) maybeSweep(now int64) {
	at := min(now, t.prev)
	t.prev = now
	switch {
	case t.swept == 0:
		t.swept = now // the first decision: nothing to forget yet
	case now < t.swept-sweepEvery:
		t.swept = now
	case at >= t.swept+sweepEvery:
		t.sweep(at)
		t.swept = at
	}
}

// sweep forgets, at now (Unix seconds), the counters whose window ended
// more than one window length before now (the longest that counted in
// each) and the audit records of those windows, as Prune deletes
// counters, and the GCRA buckets that have drained, as Prune does. Nothing reads the audit records of this store
// but a test of its own; kept until Prune with no retention, they were
// most of what it held (about 140 bytes an allowed request).
func (t *tables) sweep(now int64) {
	for w, c := range t.windows {
		if w.start+2*c.longest < now {
			delete(t.windows, w)
		}
	}
	for k, b := range t.buckets {
		if b.tat < now*int64(time.Second) {
			delete(t.buckets, k)
		}
	}
	kept := t.audit[:0]
	for _, r := range t.audit {
		if r.until >= now {
			kept = append(kept, r)
		}
	}
	clear(t.audit[len(kept):])
	t.audit = kept
}

// Prune deletes the counters whose window ended more than one window
// length before now, each by its own window (a sliding decision still
// reads the window before the current one), the GCRA buckets that have
// drained by now (a bucket whose TAT has passed is as full as a fresh
// key's), and the audit records made before auditBefore, to the
// millisecond they are written with (none when auditBefore is zero).
// Overrides stay.
//
// It holds the store's mutex while it walks everything the store keeps, so
// decisions wait for it: in memory that is a map walk, where the SQLite
// store, whose batches cost disk writes, prunes in batches.
func (s *Store) Prune(ctx context.Context, now, auditBefore time.Time) (limiter.Pruned, error) {
	var out limiter.Pruned
	err := s.do(ctx, func(t *tables) error {
		for w, c := range t.windows {
			if w.start+2*c.seconds < now.Unix() {
				delete(t.windows, w)
				out.Windows++
			}
		}
		for k, b := range t.buckets {
			if b.tat < now.UnixNano() {
				delete(t.buckets, k)
				out.Buckets++
			}
		}
		if auditBefore.IsZero() {
			return nil
		}
		// Compared as written, as the SQLite store compares them.
		before := auditBefore.UTC().Format(decide.CalledAtLayout)
		kept := t.audit[:0]
		for _, r := range t.audit {
			if r.calledAt >= before {
				kept = append(kept, r)
			}
		}
		out.Audit = int64(len(t.audit) - len(kept))
		clear(t.audit[len(kept):]) // let the deleted records' strings go
		t.audit = kept
		return nil
	})
	return out, err
}
