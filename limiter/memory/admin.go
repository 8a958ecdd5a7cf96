package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// SetOverride stores o as key's override under p and returns the one it
// replaced. The store keeps no time it was set: it reads no clock.
func (s *Store) SetOverride(ctx context.Context, p limiter.Policy, key string, o limiter.Override) (*limiter.Override, error) {
	if err := decide.Target(p, key); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	if err := o.Validate(p); err != nil {
		return nil, fmt.Errorf("memory: override of %q: %w", p.Name, err)
	}
	var before *limiter.Override
	err := s.do(ctx, func(t *tables) error {
		k := decide.StoreKey(p, key)
		before = t.override(k)
		t.overrides[k] = o
		return nil
	})
	return before, err
}

// Override reads key's override under p.
func (s *Store) Override(ctx context.Context, p limiter.Policy, key string) (*limiter.Override, error) {
	if err := decide.Target(p, key); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	var o *limiter.Override
	err := s.do(ctx, func(t *tables) error {
		o = t.override(decide.StoreKey(p, key))
		return nil
	})
	return o, err
}

// DeleteOverride removes key's override under p and returns it.
func (s *Store) DeleteOverride(ctx context.Context, p limiter.Policy, key string) (*limiter.Override, error) {
	if err := decide.Target(p, key); err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	var before *limiter.Override
	err := s.do(ctx, func(t *tables) error {
		k := decide.StoreKey(p, key)
		before = t.override(k)
		delete(t.overrides, k)
		return nil
	})
	return before, err
}

// Reset forgets key's counters of the window containing now and the one
// before it (the ones a decision reads), or its GCRA bucket.
func (s *Store) Reset(ctx context.Context, p limiter.Policy, key string, now time.Time) error {
	if err := decide.TargetAt(p, key, now); err != nil {
		return fmt.Errorf("memory: %w", err) // its window is what now is cut by
	}
	return s.do(ctx, func(t *tables) error {
		k := decide.StoreKey(p, key)
		if p.Algorithm == limiter.GCRA {
			delete(t.buckets, k)
			return nil
		}
		start := decide.WindowStart(now, p.Window).Unix()
		delete(t.windows, window{k, start})
		delete(t.windows, window{k, start - decide.WindowSeconds(p)})
		return nil
	})
}
