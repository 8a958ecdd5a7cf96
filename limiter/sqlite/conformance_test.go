package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
	"github.com/ft251/ratelimit/limiter/storetest"
)

// TestConformance runs the limiter's behaviour suite on SQLite files.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Instance {
			path := filepath.Join(t.TempDir(), "ratelimit.db")
			s := mustOpenAt(t, path)
			db := inspect(t, path)
			return storetest.Instance{
				Store:   s,
				Another: func(t *testing.T) limiter.Store { return mustOpenAt(t, path) },
				Stored: func(t *testing.T, p limiter.Policy, key string, start time.Time) (int64, []storetest.Audit) {
					window := limiter.FormatWindow(start)
					var count int64
					err := db.QueryRow(`SELECT count FROM rate_limit_windows WHERE key = ? AND window_start = ?`, p.StoreKey(key), window).Scan(&count)
					if err != nil && err != sql.ErrNoRows {
						t.Fatal(err)
					}
					rows, err := db.Query(`SELECT called_at, route, request_id FROM api_calls WHERE key = ? AND window_start = ? ORDER BY id`, key, window)
					if err != nil {
						t.Fatal(err)
					}
					defer rows.Close()
					var audit []storetest.Audit
					for rows.Next() {
						var a storetest.Audit
						rows.Scan(&a.CalledAt, &a.Route, &a.RequestID)
						audit = append(audit, a)
					}
					return count, audit
				},
				Expire: func(t *testing.T, now, auditBefore time.Time) {
					if _, err := s.Prune(context.Background(), now, auditBefore); err != nil {
						t.Fatal(err)
					}
				},
			}
		},
		Broken: func(t *testing.T) limiter.Store {
			// Its directory does not exist: an EFS mount that is not there.
			s, _ := sqlite.Open(context.Background(), storeConfig(filepath.Join(t.TempDir(), "missing", "rl.db")))
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}
