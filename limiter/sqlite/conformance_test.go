package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
	"github.com/ft251/ratelimit/limiter/sqlite/sqlitetest"
	"github.com/ft251/ratelimit/limiter/storetest"
)

// TestConformance runs the limiter's behaviour suite on SQLite files.
func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		New: func(t *testing.T) storetest.Instance {
			s := sqlitetest.Open(t, storeConfig(""))
			path := s.Path()
			db := sqlitetest.Inspect(t, path)
			return storetest.Instance{
				Store:   s,
				Another: func(t *testing.T) limiter.Store { return sqlitetest.Open(t, storeConfig(path)) },
				Stored: func(t *testing.T, p limiter.Policy, key string, start time.Time) (int64, []storetest.Audit) {
					window := limiter.FormatWindow(start)
					var count int64
					err := db.QueryRow(`SELECT count FROM rate_limit_windows WHERE key = ? AND window_start = ?`, p.StoreKey(key), window).Scan(&count)
					if err != nil && !errors.Is(err, sql.ErrNoRows) {
						t.Fatal(err)
					}
					rows, err := db.Query(`SELECT called_at, route, request_id, cost FROM api_calls WHERE key = ? AND window_start = ? ORDER BY id`, key, window)
					if err != nil {
						t.Fatal(err)
					}
					defer rows.Close()
					var audit []storetest.Audit
					for rows.Next() {
						var a storetest.Audit
						if err := rows.Scan(&a.CalledAt, &a.Route, &a.RequestID, &a.Cost); err != nil {
							t.Fatal(err)
						}
						audit = append(audit, a)
					}
					if err := rows.Err(); err != nil {
						t.Fatal(err)
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
			s, err := sqlite.Open(context.Background(), storeConfig(filepath.Join(t.TempDir(), "missing", "rl.db")))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	})
}
