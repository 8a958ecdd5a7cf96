package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// TestConformance runs the limiter's behaviour suite on one SQLite file.
func TestConformance(t *testing.T) { storetest.Run(t, harness(1)) }

// TestConformanceSharded runs it on four files, over which the suite's
// keys and policies spread: its attempts under several policies fall into
// several shards, and are decided across them.
func TestConformanceSharded(t *testing.T) {
	t.Parallel()
	h := harness(4)
	storetest.Run(t, h)
	// The suite did decide across shards: the policies of
	// EveryPolicyCountsAndAllMustAllow count two client keys, which fall
	// into two files.
	in := h.New(t)
	checks := []limiter.Charge{{Policy: ping, Key: "alice"}, {Policy: limiter.Policy{Name: "hourly", Limit: 4, Window: time.Hour, Namespace: "hourly"}, Key: "alice"},
		{Policy: limiter.Policy{Name: "ip", Limit: 100, Window: time.Minute, Namespace: "ip"}, Key: "203.0.113.7"}}
	shards := map[int]bool{}
	for _, c := range checks {
		shards[sqlite.ShardOf(c.Key, 4)] = true
	}
	if len(shards) < 2 {
		t.Fatalf("the suite's multi-policy attempt falls into one shard (%v): it shows nothing across shards", shards)
	}
	if _, err := in.Store.Allow(context.Background(), limiter.Attempt{Charges: checks, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if n := in.Store.(*sqlite.Store).Stats().CrossShard; n != 1 {
		t.Errorf("%d cross-shard decisions, want 1", n)
	}
}

func shardedConfig(path string, shards int) sqlite.Config {
	cfg := storeConfig(path)
	cfg.Shards = shards
	return cfg
}

// harness opens stores of the given number of shards, and reads a key's
// counter from its shard and its audit rows from every shard.
func harness(shards int) storetest.Harness {
	return storetest.Harness{
		New: func(t *testing.T) storetest.Instance {
			s := sqlitetest.Open(t, shardedConfig("", shards))
			sqlitetest.OpenShards(t, s) // Stored reads every file
			dbs := make([]*sql.DB, shards)
			for i, p := range s.Paths() {
				dbs[i] = sqlitetest.Inspect(t, p)
			}
			return storetest.Instance{
				Store:   s,
				Another: func(t *testing.T) limiter.Store { return sqlitetest.Open(t, shardedConfig(s.Path(), shards)) },
				Stored: func(t *testing.T, p limiter.Policy, key string, start time.Time) (int64, []storetest.Audit) {
					window := decide.FormatWindow(start)
					var count int64
					err := dbs[sqlite.ShardOf(key, shards)].QueryRow(`SELECT count FROM rate_limit_windows WHERE key = ? AND window_start = ?`, decide.StoreKey(p, key), window).Scan(&count)
					if err != nil && !errors.Is(err, sql.ErrNoRows) {
						t.Fatal(err)
					}
					var audit []storetest.Audit
					for _, db := range dbs {
						audit = append(audit, auditRows(t, db, key, window)...)
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
			s, err := sqlite.Open(context.Background(), shardedConfig(filepath.Join(t.TempDir(), "missing", "rl.db"), shards))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
	}
}

// auditRows are the audit rows of key's window in db, in the order they
// were appended.
func auditRows(t *testing.T, db *sql.DB, key, window string) []storetest.Audit {
	t.Helper()
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
	return audit
}
