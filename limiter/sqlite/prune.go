package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

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
)

// Prune deletes expired counters and old audit rows in batches of
// PruneBatch rows, one write transaction per batch.
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
	h, err := s.handle(ctx, now)
	if err != nil {
		return out, s.fault(nil, "open", err)
	}
	if out.Windows, err = s.pruneWindows(ctx, h, now); err != nil {
		return out, s.fault(h, "prune windows", err)
	}
	if !auditBefore.IsZero() {
		if out.Audit, err = s.pruneAudit(ctx, h, auditBefore); err != nil {
			return out, s.fault(h, "prune audit", err)
		}
	}
	return out, nil
}

func (s *Store) pruneWindows(ctx context.Context, h *handle, now time.Time) (int64, error) {
	var deleted int64
	loKey, loStart := "", ""
	for {
		n, hiKey, hiStart, last, err := s.pruneWindowBatch(ctx, h, loKey, loStart, now.Unix())
		deleted += n
		if err != nil || last {
			return deleted, err
		}
		loKey, loStart = hiKey, hiStart
	}
}

// pruneWindowBatch deletes the expired rows among the PruneBatch rows after
// (loKey, loStart) in one transaction and returns where it stopped.
func (s *Store) pruneWindowBatch(ctx context.Context, h *handle, loKey, loStart string, now int64) (deleted int64, hiKey, hiStart string, last bool, err error) {
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, "", "", false, err
	}
	defer tx.Rollback()
	var res sql.Result
	err = tx.QueryRowContext(ctx, pruneWindowsBoundSQL, loKey, loStart, PruneBatch-1).Scan(&hiKey, &hiStart)
	switch {
	case errors.Is(err, sql.ErrNoRows): // fewer than a batch left: this is the last
		last = true
		res, err = tx.ExecContext(ctx, pruneWindowsLastSQL, loKey, loStart, now)
	case err == nil:
		res, err = tx.ExecContext(ctx, pruneWindowsBatchSQL, loKey, loStart, hiKey, hiStart, now)
	}
	if err != nil {
		return 0, "", "", false, err
	}
	if err := tx.Commit(); err != nil {
		return 0, "", "", false, err
	}
	deleted, err = res.RowsAffected()
	return deleted, hiKey, hiStart, last, err
}

func (s *Store) pruneAudit(ctx context.Context, h *handle, before time.Time) (int64, error) {
	// Read the boundary outside any write transaction: it scans the old
	// rows once, under a shared lock that does not stop writers from
	// preparing their transactions.
	var boundary int64
	err := h.db.QueryRowContext(ctx, pruneAuditBoundarySQL, before.UTC().Format(CalledAtLayout)).Scan(&boundary)
	if errors.Is(err, sql.ErrNoRows) {
		err = h.db.QueryRowContext(ctx, pruneAuditEndSQL).Scan(&boundary)
	}
	if err != nil {
		return 0, err
	}
	var deleted int64
	for {
		n, err := s.pruneAuditBatch(ctx, h, boundary)
		deleted += n
		if err != nil || n < PruneBatch {
			return deleted, err
		}
	}
}

func (s *Store) pruneAuditBatch(ctx context.Context, h *handle, boundary int64) (int64, error) {
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, pruneAuditBatchSQL, boundary, PruneBatch)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
