package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/ft251/ratelimit/internal/backoff"
	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// PruneBatch is how many rows one prune transaction looks at. Each batch is
// its own write transaction, so a large backlog never holds the lock for
// longer than one batch takes.
const PruneBatch = 1000

const (
	// pruneWindowsBoundSQL finds the last primary key of the next batch.
	pruneWindowsBoundSQL = `SELECT key, window_start FROM rate_limit_windows
WHERE (key, window_start) > (?1, ?2)
ORDER BY key, window_start LIMIT 1 OFFSET ?3`
	// A row has expired when its window ended more than one window length
	// ago: window_start + 2 * window < now, for the row's own window.
	pruneWindowsBatchSQL = `DELETE FROM rate_limit_windows
WHERE (key, window_start) > (?1, ?2) AND (key, window_start) <= (?3, ?4)
AND unixepoch(window_start) + 2 * window_seconds < ?5`
	pruneWindowsLastSQL = `DELETE FROM rate_limit_windows
WHERE (key, window_start) > (?1, ?2)
AND unixepoch(window_start) + 2 * window_seconds < ?3`
	pruneAuditBoundarySQL = `SELECT id FROM api_calls WHERE called_at >= ?1 ORDER BY id LIMIT 1`
	pruneAuditEndSQL      = `SELECT coalesce(max(id), 0) + 1 FROM api_calls`
	pruneAuditBatchSQL    = `DELETE FROM api_calls WHERE id IN (SELECT id FROM api_calls WHERE id < ?1 ORDER BY id LIMIT ?2)`
	// A GCRA bucket whose TAT has passed is as full as a fresh key's.
	pruneBucketsBatchSQL = `DELETE FROM gcra_buckets WHERE key IN (SELECT key FROM gcra_buckets WHERE tat < ?1 LIMIT ?2)`
)

// Prune deletes expired counters, drained GCRA buckets and old audit rows
// in every shard, one after another, in batches of PruneBatch rows, one
// write transaction per batch, pausing between batches (see yield) so that
// decisions are not held up by more than about one; a shard that fails is
// reported, and the others pruned all the same. Then it deletes the
// super-journals that processes killed in the middle of cross-shard
// commits left behind and no journal names (see superjournal.go).
//
// Counters are found by walking the primary key, PruneBatch rows per
// transaction, and deleting those whose own window ended more than a window
// ago, so a policy with a 30-day window keeps its rows beside one with a
// 1-second window. Audit rows are appended in rowid order, so the rows made
// before auditBefore are a rowid prefix, up to the first row that is not
// older; rows past it that are older (clocks of different hosts differ by a
// little) wait for the next run. Prune never deletes a younger row.
func (s *Store) Prune(ctx context.Context, now, auditBefore time.Time) (limiter.Pruned, error) {
	var out limiter.Pruned
	if err := s.first(ctx); err != nil {
		return out, err
	}
	// A shard that fails (one met only now, at its first use, may hold
	// another layout's file) does not keep the others from being pruned:
	// its error is reported with theirs, once every shard has been tried.
	var errs []error
	for _, sh := range s.shards {
		if unmade(sh.path) {
			continue
		}
		p, err := sh.prune(ctx, now, auditBefore)
		out.Windows, out.Buckets, out.Audit = out.Windows+p.Windows, out.Buckets+p.Buckets, out.Audit+p.Audit
		if err != nil {
			if ctx.Err() != nil {
				return out, err
			}
			errs = append(errs, err)
		}
	}
	var err error
	out.SuperJournals, err = s.removeSuperJournals(ctx)
	return out, errors.Join(append(errs, err)...)
}

// unmade reports whether no file is at path: a shard that no call has
// needed yet, in this process or another, holds nothing to prune, and
// Prune leaves it to the first call that needs it rather than create and
// migrate it (with 64 shards on the EFS model, making every file took 9 s).
// One stat; any answer but "does not exist" means the shard is pruned.
func unmade(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}

// prune is Prune on one shard.
func (sh *shard) prune(ctx context.Context, now, auditBefore time.Time) (limiter.Pruned, error) {
	var out limiter.Pruned
	var err error
	if out.Windows, err = sh.pruneWindows(ctx, now); err != nil {
		return out, err
	}
	if out.Buckets, err = sh.pruneBuckets(ctx, now); err != nil {
		return out, err
	}
	// Outcomes of hand-offs are no one's business but the store's: a
	// failure to prune them is reported, and the audit pruned all the same.
	_, herr := sh.pruneHandoffs(ctx)
	if auditBefore.IsZero() {
		return out, herr
	}
	out.Audit, err = sh.pruneAudit(ctx, auditBefore)
	return out, errors.Join(err, herr)
}

// pruneBuckets deletes drained GCRA buckets, PruneBatch per transaction.
func (sh *shard) pruneBuckets(ctx context.Context, now time.Time) (int64, error) {
	return sh.deleteBatches(ctx, "prune buckets", pruneBucketsBatchSQL, now.UnixNano())
}

// deleteBatches runs query, a DELETE of at most PruneBatch rows (its last
// parameter, after arg), one write transaction at a time, yielding between
// them, until a batch deletes fewer than PruneBatch, and returns how many
// rows it deleted.
func (sh *shard) deleteBatches(ctx context.Context, op, query string, arg any) (int64, error) {
	var deleted int64
	for {
		var n int64
		began := time.Now()
		err := sh.write(ctx, op, func(tx *sql.Tx, _ *handle) error {
			res, err := tx.ExecContext(ctx, query, arg, PruneBatch)
			if err == nil {
				n, err = res.RowsAffected()
			}
			return err
		})
		deleted += n
		if err != nil || n < PruneBatch {
			return deleted, err
		}
		if err := yield(ctx, time.Since(began)); err != nil {
			return deleted, sh.wrap(op, err)
		}
	}
}

func (sh *shard) pruneWindows(ctx context.Context, now time.Time) (int64, error) {
	var deleted int64
	loKey, loStart := "", ""
	for {
		var n int64
		var hiKey, hiStart string
		last := false
		began := time.Now()
		// One batch: find where the next PruneBatch rows end, and delete
		// the expired ones among them.
		err := sh.write(ctx, "prune windows", func(tx *sql.Tx, _ *handle) error {
			var res sql.Result
			err := tx.QueryRowContext(ctx, pruneWindowsBoundSQL, loKey, loStart, PruneBatch-1).Scan(&hiKey, &hiStart)
			switch {
			case errors.Is(err, sql.ErrNoRows): // fewer than a batch left: this is the last
				last = true
				res, err = tx.ExecContext(ctx, pruneWindowsLastSQL, loKey, loStart, now.Unix())
			case err == nil:
				res, err = tx.ExecContext(ctx, pruneWindowsBatchSQL, loKey, loStart, hiKey, hiStart, now.Unix())
			}
			if err == nil {
				n, err = res.RowsAffected()
			}
			return err
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		if last {
			return deleted, nil
		}
		if err := yield(ctx, time.Since(began)); err != nil {
			return deleted, sh.wrap("prune windows", err)
		}
		loKey, loStart = hiKey, hiStart
	}
}

// yield pauses a prune between batches for as long as the batch took, so
// that decisions waiting for the lock, which poll at about the pace of their
// own transactions, find it free: a prune holds the lock at most half the
// time, and no decision waits for more than about one batch.
func yield(ctx context.Context, batch time.Duration) error {
	return backoff.Sleep(ctx, batch)
}

func (sh *shard) pruneAudit(ctx context.Context, before time.Time) (int64, error) {
	// Read the boundary outside any write transaction: it scans the old
	// rows once, under a shared lock that does not stop writers from
	// preparing their transactions.
	var boundary int64
	err := sh.do(ctx, "prune audit", func(h *handle) error {
		err := h.db.QueryRowContext(ctx, pruneAuditBoundarySQL, before.UTC().Format(decide.CalledAtLayout)).Scan(&boundary)
		if errors.Is(err, sql.ErrNoRows) {
			err = h.db.QueryRowContext(ctx, pruneAuditEndSQL).Scan(&boundary)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	return sh.deleteBatches(ctx, "prune audit", pruneAuditBatchSQL, boundary)
}
