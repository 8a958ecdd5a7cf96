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
// decisions' clock has moved on a minute since the last sweep, and enough
// decisions have been made since that the walk costs each of them little
// (at least 64, and an eighth of the counters held). The instants are the
// callers' (Request.At, a clock that steps), so the clock is the earliest
// of the last three decisions': one or two decisions hours ahead do not
// forget the live counters of every other key. A clock that steps back
// sweeps from where it is (which forgets less), rather than waiting for
// it to be back.
func (t *tables) maybeSweep(now int64) {
	t.recent[t.decided%len(t.recent)] = now
	t.decided++
	t.since++
	at := now
	for _, r := range t.recent[:min(t.decided, len(t.recent))] {
		at = min(at, r)
	}
	switch {
	case t.swept == 0:
		t.swept = at // the first decision: nothing to forget yet
	case t.since < 64+len(t.windows)/8:
	case at >= t.swept+sweepEvery || at < t.swept-sweepEvery:
		t.sweep(at)
		t.swept, t.since = at, 0
	}
}

// sweep forgets, at now (Unix seconds), the counters whose window ended
// more than one window length before now (the longest window counted in
// their namespace), the audit records of those windows, and the GCRA
// buckets that have drained, as Prune deletes them. Nothing reads the
// audit records of this store but a test of its own; kept until Prune
// with no retention, they were most of what it held (about 140 bytes an
// allowed request).
func (t *tables) sweep(now int64) {
	t.sweeps++
	for w := range t.windows {
		if w.start+2*t.longest[decide.NamespaceOf(w.key)] < now {
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
