package sqlite_test

// Benchmarks of the decision path, side by side with the design note's
// literal pattern and a raw-SQLite floor, in the rollback-journal mode used
// on EFS (DELETE, synchronous=FULL) and in WAL (local only). See
// BENCHMARKS.md for figures and the command.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

var benchModes = []string{"DELETE", "WAL"}

// BenchDir is a fresh directory for a benchmark's database: under
// $RATELIMIT_BENCH_DIR when set, so that the benchmarks can run on a
// latencyfs mount (a model of EFS), else in b.TempDir().
func BenchDir(b *testing.B) string {
	root := os.Getenv("RATELIMIT_BENCH_DIR")
	if root == "" {
		return b.TempDir()
	}
	dir, err := os.MkdirTemp(root, "bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// benchPolicy allows every attempt, so each decision writes the counter and
// an audit row: the costlier path.
var benchPolicy = limiter.Policy{Name: "ping", Limit: 1 << 40, Window: time.Minute}

func benchStore(b *testing.B, mode string) *sqlite.Store {
	b.Helper()
	return sqlitetest.Open(b, sqlite.Config{
		Path: filepath.Join(BenchDir(b), "bench.db"), JournalMode: mode, BusyTimeout: 5 * time.Second,
	})
}

// rawDB opens the store's file as a plain database/sql handle with the
// store's pragmas, for the comparison patterns.
func rawDB(b *testing.B, s *sqlite.Store, mode string) *sql.DB {
	b.Helper()
	sync := "FULL"
	if mode == "WAL" {
		sync = "NORMAL"
	}
	db, err := sql.Open("sqlite", fmt.Sprintf("file:%s?_pragma=busy_timeout(5000)&_pragma=journal_mode(%s)&_pragma=synchronous(%s)&_txlock=immediate", s.Path(), mode, sync))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	return db
}

func benchKey(i int) string { return fmt.Sprintf("client-%d", i%8) }

// BenchmarkDecision is Store.Allow: one immediate transaction with the
// upsert RETURNING count and the audit insert.
func BenchmarkDecision(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			s := benchStore(b, mode)
			ctx := context.Background()
			now := t0.Add(30 * time.Second)
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Allow(ctx, storetest.One(benchPolicy, benchKey(i), now, "GET /ping", "r")); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawFloor is the same decision transaction with prepared
// statements and nothing else: no store, no retry loop, no Go decision.
func BenchmarkRawFloor(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			db := rawDB(b, benchStore(b, mode), mode)
			upsert, _ := db.Prepare(`INSERT INTO rate_limit_windows (key, window_start, count, window_seconds) VALUES (?1, ?2, 1, 60)
ON CONFLICT (key, window_start) DO UPDATE SET count = count + 1 RETURNING count`)
			audit, _ := db.Prepare(`INSERT INTO api_calls (key, window_start, called_at, route, request_id) VALUES (?1, ?2, ?3, 'GET /ping', 'r')`)
			b.ResetTimer()
			for i := range b.N {
				tx, err := db.Begin()
				if err != nil {
					b.Fatal(err)
				}
				var n int64
				if err := tx.Stmt(upsert).QueryRow(benchKey(i), "2026-01-01T00:00:00Z").Scan(&n); err != nil {
					b.Fatal(err)
				}
				if _, err := tx.Stmt(audit).Exec(benchKey(i), "2026-01-01T00:00:00Z", "2026-01-01T00:00:30.000Z"); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNoteLiteral is the design note's pattern taken literally: an
// autocommit upsert, then a SELECT of the count, then an autocommit audit
// insert. Two write transactions per decision, and a window between them in
// which another process's increment changes what the SELECT sees.
func BenchmarkNoteLiteral(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			db := rawDB(b, benchStore(b, mode), mode)
			b.ResetTimer()
			for i := range b.N {
				k := benchKey(i)
				if _, err := db.Exec(`INSERT INTO rate_limit_windows (key, window_start, count, window_seconds) VALUES (?1, ?2, 1, 60)
ON CONFLICT (key, window_start) DO UPDATE SET count = count + 1`, k, "2026-01-01T00:00:00Z"); err != nil {
					b.Fatal(err)
				}
				var n int64
				if err := db.QueryRow(`SELECT count FROM rate_limit_windows WHERE key = ?1 AND window_start = ?2`, k, "2026-01-01T00:00:00Z").Scan(&n); err != nil {
					b.Fatal(err)
				}
				if n <= benchPolicy.Limit {
					if _, err := db.Exec(`INSERT INTO api_calls (key, window_start, called_at, route, request_id) VALUES (?1, ?2, ?3, 'GET /ping', 'r')`,
						k, "2026-01-01T00:00:00Z", "2026-01-01T00:00:30.000Z"); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkUsage is the /status read: one SELECT, no write transaction.
func BenchmarkUsage(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			s := benchStore(b, mode)
			ctx := context.Background()
			now := t0.Add(30 * time.Second)
			for i := range 8 {
				s.Allow(ctx, storetest.One(benchPolicy, benchKey(i), now, "", ""))
			}
			b.ResetTimer()
			for i := range b.N {
				if u, err := s.Usage(ctx, benchPolicy, benchKey(i), now); err != nil || u.Count != 1 {
					b.Fatal(u, err)
				}
			}
		})
	}
}

// BenchmarkPrune100k prunes 100,000 expired windows and 100,000 old audit
// rows, among 10,000 live windows, in batches of sqlite.PruneBatch.
func BenchmarkPrune100k(b *testing.B) {
	for _, mode := range benchModes {
		b.Run(mode, func(b *testing.B) {
			s := benchStore(b, mode)
			db := rawDB(b, s, mode)
			ctx := context.Background()
			for range b.N {
				b.StopTimer()
				if _, err := db.Exec(`
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 109999)
INSERT INTO rate_limit_windows (key, window_start, count, window_seconds)
SELECT printf('k%06d', i), CASE WHEN i % 11 = 0 THEN '2026-01-01T01:00:00Z' ELSE '2026-01-01T00:00:00Z' END, 1, 60 FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99999)
INSERT INTO api_calls (key, window_start, called_at, route, request_id)
SELECT printf('k%06d', i), '2026-01-01T00:00:00Z', '2026-01-01T00:00:00.000Z', 'GET /ping', 'r' FROM n;`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				p, err := s.Prune(ctx, t0.Add(time.Hour+30*time.Second), t0.Add(time.Minute))
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if p.Windows != 100000 || p.Audit != 100000 {
					b.Fatalf("pruned %+v, want 100000 and 100000", p)
				}
				if _, err := db.Exec(`DELETE FROM rate_limit_windows`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// threePolicies are a per-key limit, a sliding burst limit and a daily
// quota, none denying: each decision writes three counters and an audit row.
var threePolicies = []limiter.Policy{
	benchPolicy,
	{Name: "burst", Limit: 1 << 40, Window: time.Second, Namespace: "burst", Algorithm: limiter.Sliding},
	{Name: "daily", Limit: 1 << 40, Window: 24 * time.Hour, Namespace: "daily"},
}

// BenchmarkDecisionPolicies is Store.Allow with one policy and with three,
// cycling over 1,000 keys whose counters exist (one pass is made first), so
// each policy's counter lives on its own pages as it would in a busy table.
func BenchmarkDecisionPolicies(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("%d", n), func(b *testing.B) {
			s := benchStore(b, "DELETE")
			ctx := context.Background()
			now := t0.Add(30*time.Second + 500*time.Millisecond)
			attempt := func(i int) limiter.Attempt {
				key := fmt.Sprintf("client-%04d", i%1000)
				checks := make([]limiter.Charge, n)
				for j := range n {
					checks[j] = limiter.Charge{Policy: threePolicies[j], Key: key}
				}
				return limiter.Attempt{Charges: checks, Now: now, Route: "GET /ping", RequestID: "r"}
			}
			for i := range 1000 {
				if _, err := s.Allow(ctx, attempt(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Allow(ctx, attempt(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecisionAlgorithms is Store.Allow under one policy of each
// kind, every attempt allowed: a fixed window (BenchmarkDecision's), a
// GCRA bucket (a read of its TAT and a write, in place of the upsert), and
// a fixed window for keys that have an override (found by the read every
// decision makes, which then applies it).
func BenchmarkDecisionAlgorithms(b *testing.B) {
	gcra := limiter.Policy{Name: "tokens", Limit: 1_000_000, Window: time.Minute, Namespace: "tokens", Algorithm: limiter.GCRA, Burst: 1 << 20}
	for _, kind := range []string{"fixed", "gcra", "override"} {
		b.Run(kind, func(b *testing.B) {
			s := benchStore(b, "DELETE")
			ctx := context.Background()
			p := benchPolicy
			switch kind {
			case "gcra":
				p = gcra
			case "override":
				for i := range 8 {
					if _, err := s.SetOverride(ctx, p, benchKey(i), limiter.Override{Limit: 1 << 41}); err != nil {
						b.Fatal(err)
					}
				}
			}
			now := t0.Add(30 * time.Second)
			b.ResetTimer()
			for i := range b.N {
				o, err := s.Allow(ctx, storetest.One(p, benchKey(i), now, "GET /ping", "r"))
				if err != nil || !o.Allowed {
					b.Fatal(o, err)
				}
			}
		})
	}
}

// BenchmarkOverrideLookup weighs the two ways to apply overrides: read in
// the decision's transaction (what the store does: exact from the next
// decision on), or cached by each process and left out of the transaction
// (stale for as long as the cache lives). Both are the raw decision
// transaction; "in-transaction" adds the override's SELECT.
func BenchmarkOverrideLookup(b *testing.B) {
	for _, way := range []string{"cached", "in-transaction"} {
		b.Run(way, func(b *testing.B) {
			db := rawDB(b, benchStore(b, "DELETE"), "DELETE")
			upsert, _ := db.Prepare(`INSERT INTO rate_limit_windows (key, window_start, count, window_seconds) VALUES (?1, ?2, 1, 60)
ON CONFLICT (key, window_start) DO UPDATE SET count = count + 1 RETURNING count`)
			audit, _ := db.Prepare(`INSERT INTO api_calls (key, window_start, called_at, route, request_id) VALUES (?1, ?2, ?3, 'GET /ping', 'r')`)
			override, _ := db.Prepare(`SELECT "limit", burst FROM overrides WHERE key = ?1`)
			b.ResetTimer()
			for i := range b.N {
				tx, err := db.Begin()
				if err != nil {
					b.Fatal(err)
				}
				if way == "in-transaction" {
					var limit, burst int64
					if err := tx.Stmt(override).QueryRow(benchKey(i)).Scan(&limit, &burst); err != nil && err != sql.ErrNoRows {
						b.Fatal(err)
					}
				}
				var n int64
				if err := tx.Stmt(upsert).QueryRow(benchKey(i), "2026-01-01T00:00:00Z").Scan(&n); err != nil {
					b.Fatal(err)
				}
				if _, err := tx.Stmt(audit).Exec(benchKey(i), "2026-01-01T00:00:00Z", "2026-01-01T00:00:30.000Z"); err != nil {
					b.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
