package memory

import (
	"context"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

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
