package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// CalledAtLayout is how api_calls.called_at is written: UTC with
// milliseconds, fixed width so that it sorts as text.
const CalledAtLayout = "2006-01-02T15:04:05.000Z"

const (
	// upsertSQL counts the attempt and returns the new count in one
	// statement: the first attempt in a window inserts 1, later ones add 1.
	upsertSQL = `INSERT INTO rate_limit_windows (key, window_start, count, window_seconds)
VALUES (?1, ?2, 1, ?3)
ON CONFLICT (key, window_start) DO UPDATE SET count = count + 1
RETURNING count`
	auditSQL = `INSERT INTO api_calls (key, window_start, called_at, route, request_id)
VALUES (?1, ?2, ?3, ?4, ?5)`
	usageSQL = `SELECT count FROM rate_limit_windows WHERE key = ?1 AND window_start = ?2`
)

// Allow counts the attempt and decides it in one immediate transaction: the
// upsert returns the count including this attempt, the policy decides from
// it, and an allowed attempt's audit row is inserted before the commit. No
// count is read and written back from Go, so concurrent processes cannot lose
// an increment, and an audit row exists exactly when its increment committed
// as an allowed one.
func (s *Store) Allow(ctx context.Context, a limiter.Attempt) (limiter.Decision, error) {
	if err := a.Policy.Validate(); err != nil {
		return limiter.Decision{}, fmt.Errorf("sqlite: %w", err)
	}
	window := limiter.FormatWindow(limiter.WindowStart(a.Now, a.Policy.Window))
	var d limiter.Decision
	err := s.write(ctx, "decide", func(tx *sql.Tx, h *handle) error {
		var count int64
		err := tx.StmtContext(ctx, h.upsert).QueryRowContext(ctx,
			a.Policy.StoreKey(a.Key), window, a.Policy.WindowSeconds()).Scan(&count)
		if err != nil {
			return err
		}
		d = a.Policy.Decide(a.Key, a.Now, count)
		if d.Allowed {
			_, err = tx.StmtContext(ctx, h.audit).ExecContext(ctx,
				a.Key, window, a.Now.UTC().Format(CalledAtLayout), a.Route, a.RequestID)
		}
		return err
	})
	if err != nil {
		return limiter.Decision{}, err
	}
	return d, nil
}

// Usage reads key's count in the window containing now with one SELECT, in
// autocommit mode: it takes only a shared lock and writes nothing.
func (s *Store) Usage(ctx context.Context, p limiter.Policy, key string, now time.Time) (limiter.Usage, error) {
	if err := p.Validate(); err != nil {
		return limiter.Usage{}, fmt.Errorf("sqlite: %w", err)
	}
	window := limiter.FormatWindow(limiter.WindowStart(now, p.Window))
	// A read waits for the lock (a commit in progress) or this process's
	// connection no longer than a write would.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BusyTimeout)
	defer cancel()
	var count int64
	err := s.do(ctx, "read count", func(h *handle) error {
		err := h.usage.QueryRowContext(ctx, p.StoreKey(key), window).Scan(&count)
		if errors.Is(err, sql.ErrNoRows) {
			count, err = 0, nil
		}
		return err
	})
	if err != nil && !s.noDatabaseYet() {
		return limiter.Usage{}, err
	}
	return p.UsageAt(key, now, count), nil
}

// noDatabaseYet reports, for a read-only store, that the database file does
// not exist but its directory does: no writer has counted anything yet, so
// every count is 0. (A missing directory is a mount or path fault, and
// stays one.)
func (s *Store) noDatabaseYet() bool {
	if !s.cfg.ReadOnly {
		return false
	}
	if _, err := os.Stat(s.path); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	fi, err := os.Stat(filepath.Dir(s.path))
	return err == nil && fi.IsDir()
}
