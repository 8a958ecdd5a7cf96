package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

const (
	overrideSQL    = `SELECT "limit", burst FROM overrides WHERE key = ?1`
	setOverrideSQL = `INSERT INTO overrides (key, policy, client_key, "limit", burst, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (key) DO UPDATE SET "limit" = excluded."limit", burst = excluded.burst, updated_at = excluded.updated_at`
	deleteOverrideSQL = `DELETE FROM overrides WHERE key = ?1`
	resetWindowsSQL   = `DELETE FROM rate_limit_windows WHERE key = ?1 AND window_start IN (?2, ?3)`
	resetBucketSQL    = `DELETE FROM gcra_buckets WHERE key = ?1`
)

// SetOverride stores o as key's override under p and returns the one it
// replaced, in one write transaction on key's shard.
func (s *Store) SetOverride(ctx context.Context, p limiter.Policy, key string, o limiter.Override) (*limiter.Override, error) {
	if err := decide.Target(p, key); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if err := o.Validate(p); err != nil {
		return nil, fmt.Errorf("sqlite: override of %q: %w", p.Name, err)
	}
	var before *limiter.Override
	err := s.writeKey(ctx, "set override", key, func(tx *sql.Tx) (err error) {
		if before, err = readOverride(ctx, tx, decide.StoreKey(p, key)); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, setOverrideSQL, decide.StoreKey(p, key), p.Name, key, o.Limit, o.Burst, time.Now().UTC().Format(decide.CalledAtLayout))
		return err
	})
	return before, err
}

// Override reads key's override under p.
func (s *Store) Override(ctx context.Context, p limiter.Policy, key string) (*limiter.Override, error) {
	if err := decide.Target(p, key); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BusyTimeout)
	defer cancel()
	var o *limiter.Override
	sh, err := s.route(ctx, key)
	if err == nil {
		err = sh.do(ctx, "read override", func(h *handle) (err error) {
			o, err = readOverride(ctx, h.db, decide.StoreKey(p, key))
			return err
		})
	}
	if err != nil && s.noDatabaseYet(sh) {
		return nil, nil
	}
	return o, err
}

// DeleteOverride removes key's override under p and returns it.
func (s *Store) DeleteOverride(ctx context.Context, p limiter.Policy, key string) (*limiter.Override, error) {
	if err := decide.Target(p, key); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	var before *limiter.Override
	err := s.writeKey(ctx, "delete override", key, func(tx *sql.Tx) (err error) {
		if before, err = readOverride(ctx, tx, decide.StoreKey(p, key)); err != nil || before == nil {
			return err
		}
		_, err = tx.ExecContext(ctx, deleteOverrideSQL, decide.StoreKey(p, key))
		return err
	})
	return before, err
}

// Reset deletes key's counters of the window containing now and the one
// before it (the ones a decision reads), or its GCRA bucket.
func (s *Store) Reset(ctx context.Context, p limiter.Policy, key string, now time.Time) error {
	if err := decide.TargetAt(p, key, now); err != nil {
		return fmt.Errorf("sqlite: %w", err)
	}
	start := decide.WindowStart(now, p.Window)
	return s.writeKey(ctx, "reset", key, func(tx *sql.Tx) error {
		if p.Algorithm == limiter.GCRA {
			_, err := tx.ExecContext(ctx, resetBucketSQL, decide.StoreKey(p, key))
			return err
		}
		_, err := tx.ExecContext(ctx, resetWindowsSQL, decide.StoreKey(p, key), decide.FormatWindow(start), decide.FormatWindow(start.Add(-p.Window)))
		return err
	})
}

// writeKey runs fn in a write transaction on the shard of key.
func (s *Store) writeKey(ctx context.Context, op, key string, fn func(*sql.Tx) error) error {
	sh, err := s.route(ctx, key)
	if err != nil {
		return err
	}
	return sh.write(ctx, op, func(tx *sql.Tx, _ *handle) error { return fn(tx) })
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func readOverride(ctx context.Context, q querier, storeKey string) (*limiter.Override, error) {
	var o limiter.Override
	err := q.QueryRowContext(ctx, overrideSQL, storeKey).Scan(&o.Limit, &o.Burst)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &o, nil
}
