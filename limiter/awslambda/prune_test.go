package awslambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/awslambda"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// TestPruneLogsAtDebugWhenItDeletesNothing: a scheduled prune that finds
// nothing to delete logs its line at debug, so that a schedule every few
// minutes does not fill the logs; one that deletes something logs at info,
// and one that fails, at error.
func TestPruneLogsAtDebugWhenItDeletesNothing(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) limiter.Store
		level string
	}{
		{"nothing to delete", func(t *testing.T) limiter.Store {
			s := sqlitetest.Open(t, sqlite.Config{})
			if _, err := s.Allow(context.Background(), storetest.One(pingPolicy, "live", at, "", "")); err != nil {
				t.Fatal(err)
			}
			return s
		}, "DEBUG"},
		{"an expired window", func(t *testing.T) limiter.Store {
			s := sqlitetest.Open(t, sqlite.Config{})
			if _, err := s.Allow(context.Background(), storetest.One(pingPolicy, "old", at.Add(-time.Hour), "", "")); err != nil {
				t.Fatal(err)
			}
			return s
		}, "INFO"},
		{"a store that fails", func(t *testing.T) limiter.Store { return sqlitetest.Broken(t) }, "ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &bytes.Buffer{}
			log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			h := awslambda.Prune(tc.store(t), 0, func() time.Time { return at }, log)
			h(context.Background(), events.EventBridgeEvent{Time: at})
			var lines []map[string]any
			for line := range bytes.Lines(logs.Bytes()) {
				var m map[string]any
				if err := json.Unmarshal(line, &m); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				lines = append(lines, m)
			}
			if len(lines) != 1 || lines[0]["msg"] != "prune" || lines[0]["level"] != tc.level {
				t.Errorf("logged %s, want one prune line at %s", logs, tc.level)
			}
		})
	}
}
