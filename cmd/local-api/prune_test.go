package main

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// recorder is a slog.Handler that hands every record, at every level, to
// a channel.
type recorder chan slog.Record

func (r recorder) Enabled(context.Context, slog.Level) bool        { return true }
func (r recorder) Handle(_ context.Context, rec slog.Record) error { r <- rec; return nil }
func (r recorder) WithAttrs([]slog.Attr) slog.Handler              { return r }
func (r recorder) WithGroup(string) slog.Handler                   { return r }

// startPrune runs the server's prune loop on s, every millisecond, until
// the test ends, and returns a function that waits for its next line.
func startPrune(t *testing.T, s limiter.Store) func() slog.Record {
	t.Helper()
	recs := make(recorder, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		prune(ctx, slog.New(recs), s, time.Millisecond, 0)
	}()
	t.Cleanup(func() {
		cancel()
		for {
			select {
			case <-done:
				return
			case <-recs: // a line logged as it stopped
			}
		}
	})
	return func() slog.Record {
		t.Helper()
		select {
		case r := <-recs:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no prune logged in 10 s")
			return slog.Record{}
		}
	}
}

// TestPruneLoopLogsAtDebugWhenItDeletesNothing: the local server's prune
// loop logs at debug while it finds nothing to delete (every minute, by
// default), and keeps a line at info when it deletes something and at
// warn or above when it fails.
func TestPruneLoopLogsAtDebugWhenItDeletesNothing(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, sqlite.Config{})
	next := startPrune(t, s)
	for range 3 {
		if r := next(); r.Message != "prune" || r.Level != slog.LevelDebug {
			t.Fatalf("a prune that deleted nothing logged %q at %v, want prune at debug", r.Message, r.Level)
		}
	}
	// An expired window: the next prune deletes it.
	if _, err := s.Allow(context.Background(), storetest.One(limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}, "old", time.Now().Add(-time.Hour), "", "")); err != nil {
		t.Fatal(err)
	}
	r := next()
	for r.Level == slog.LevelDebug {
		r = next()
	}
	deleted := int64(-1)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "windows_deleted" {
			deleted = a.Value.Int64()
		}
		return true
	})
	if r.Message != "prune" || r.Level != slog.LevelInfo || deleted != 1 {
		t.Errorf("a prune that deleted a window logged %q at %v with windows_deleted %d, want prune at info, 1", r.Message, r.Level, deleted)
	}

	next = startPrune(t, sqlitetest.Broken(t))
	if r := next(); r.Message != "prune" || r.Level < slog.LevelWarn {
		t.Errorf("a prune that failed logged %q at %v, want prune at warn or above", r.Message, r.Level)
	}
}
