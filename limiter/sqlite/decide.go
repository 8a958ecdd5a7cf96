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

// Allow counts the attempt under each check and decides it, in one
// immediate transaction: each upsert returns its count including this
// attempt (and a sliding policy reads the previous window's count, with no
// extra write), the policies decide from them, and an allowed attempt's
// audit record is inserted before the commit. No count is read and written
// back from Go, so concurrent processes cannot lose an increment, and an
// audit record exists exactly when its increments committed as allowed.
func (s *Store) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	if err := a.Validate(); err != nil {
		return limiter.Outcome{}, fmt.Errorf("sqlite: %w", err)
	}
	var o limiter.Outcome
	err := s.write(ctx, "decide", func(tx *sql.Tx, h *handle) error {
		cur, prev := make([]int64, len(a.Checks)), make([]int64, len(a.Checks))
		upsert, usage := tx.StmtContext(ctx, h.upsert), tx.StmtContext(ctx, h.usage)
		for i, c := range a.Checks {
			start := limiter.WindowStart(a.Now, c.Policy.Window)
			err := upsert.QueryRowContext(ctx, c.Policy.StoreKey(c.Key), limiter.FormatWindow(start), c.Policy.WindowSeconds()).Scan(&cur[i])
			if err != nil {
				return err
			}
			if c.Policy.IsSliding() {
				if prev[i], err = count(ctx, usage, c.Policy.StoreKey(c.Key), start.Add(-c.Policy.Window)); err != nil {
					return err
				}
			}
		}
		o = a.Outcome(cur, prev)
		if !o.Allowed {
			return nil
		}
		first := a.Checks[0]
		_, err := tx.StmtContext(ctx, h.audit).ExecContext(ctx, first.Key,
			limiter.FormatWindow(limiter.WindowStart(a.Now, first.Policy.Window)),
			a.Now.UTC().Format(limiter.CalledAtLayout), a.Route, a.RequestID)
		return err
	})
	if err != nil {
		return limiter.Outcome{}, err
	}
	return o, nil
}

// count reads one window's count with the usage statement; no row is 0.
func count(ctx context.Context, usage *sql.Stmt, storeKey string, start time.Time) (int64, error) {
	var n int64
	err := usage.QueryRowContext(ctx, storeKey, limiter.FormatWindow(start)).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// Usage reads key's count in the window containing now (and, for a
// sliding policy, the one before) in autocommit mode: it takes only a
// shared lock and writes nothing.
func (s *Store) Usage(ctx context.Context, p limiter.Policy, key string, now time.Time) (limiter.Usage, error) {
	if err := p.Validate(); err != nil {
		return limiter.Usage{}, fmt.Errorf("sqlite: %w", err)
	}
	start := limiter.WindowStart(now, p.Window)
	// A read waits for the lock (a commit in progress) or this process's
	// connection no longer than a write would.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BusyTimeout)
	defer cancel()
	var cur, prev int64
	err := s.do(ctx, "read count", func(h *handle) (err error) {
		if cur, err = count(ctx, h.usage, p.StoreKey(key), start); err != nil || !p.IsSliding() {
			return err
		}
		prev, err = count(ctx, h.usage, p.StoreKey(key), start.Add(-p.Window))
		return err
	})
	if err != nil && !s.noDatabaseYet() {
		return limiter.Usage{}, err
	}
	return p.UsageAt(key, now, cur, prev), nil
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
