package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// The statements of the request path, one per intent. No count is read and
// written back from Go: an upsert adds the cost and returns the new count.
// The one read-then-write, a GCRA bucket's TAT, happens inside the
// decision's immediate transaction, which holds the write lock from BEGIN:
// no other writer can come between the read and the write.
const (
	// upsertSQL counts an attempt of cost ?3 and returns the new count in
	// one statement: the first attempt in a window inserts its cost, later
	// ones add theirs, up to ?5, decide.CountCap. Denied attempts count
	// too, and SQLite turns an integer sum past an int64 into a float,
	// which no later decision could read: the count saturates instead
	// (costs are at most limiter.MaxLimit, so the sum never gets there).
	upsertSQL = `INSERT INTO rate_limit_windows (key, window_start, count, window_seconds)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (key, window_start) DO UPDATE SET count = min(count + excluded.count, ?5)
RETURNING count`
	// countSQL is upsertSQL that also returns what readWindow would have
	// read before it: the count of the window starting at ?6 (the previous
	// one; NULL for a fixed window) and the key's override. The upsert
	// writes neither row, so reading them after it reads what was there
	// before the statement, and before the attempt where no other check
	// of it counts on that key (countsInOne): one statement instead of
	// two, for an attempt that no override can make impossible.
	countSQL = upsertSQL + `,
  (SELECT count FROM rate_limit_windows WHERE key = ?1 AND window_start = ?6),
  (SELECT "limit" FROM overrides WHERE key = ?1),
  (SELECT burst FROM overrides WHERE key = ?1)`
	auditSQL = `INSERT INTO api_calls (key, window_start, called_at, route, request_id, cost)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)`
	// windowSQL reads what a window policy's decision needs of one store
	// key before its upsert: the count of the window starting at ?2 (the
	// previous one; NULL for a fixed window, which reads none) and the
	// key's override. Missing rows read as NULL. It looks up two rows where
	// stateSQL looks up four: the read a decision makes most often.
	windowSQL = `SELECT
  (SELECT count FROM rate_limit_windows WHERE key = ?1 AND window_start = ?2),
  o."limit", o.burst
FROM (SELECT 1) LEFT JOIN overrides o ON o.key = ?1`
	// stateSQL reads what a GCRA decision or /status needs of one store
	// key, in one statement and so one read transaction: the counts of the
	// windows starting at ?2 and ?3, the key's override and its GCRA
	// bucket. Missing rows read as NULL.
	stateSQL = `SELECT
  (SELECT count FROM rate_limit_windows WHERE key = ?1 AND window_start = ?2),
  (SELECT count FROM rate_limit_windows WHERE key = ?1 AND window_start = ?3),
  o."limit", o.burst, g.tat, g.emission
FROM (SELECT 1) LEFT JOIN overrides o ON o.key = ?1 LEFT JOIN gcra_buckets g ON g.key = ?1`
	tatSQL = `INSERT INTO gcra_buckets (key, tat, emission) VALUES (?1, ?2, ?3)
ON CONFLICT (key) DO UPDATE SET tat = excluded.tat, emission = excluded.emission`
)

// statements are a handle's prepared statements.
type statements struct {
	upsert, count, audit, window, state, tat *sql.Stmt
}

// preparer is a *sql.DB or a *sql.Tx.
type preparer interface {
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
}

// prepare prepares the statements of the request path on db, on the tables
// of schema (a database ATTACHed under that name), or on the main database
// when schema is empty.
func (st *statements) prepare(ctx context.Context, db preparer, schema string) error {
	q := strings.NewReplacer()
	if schema != "" {
		q = strings.NewReplacer("rate_limit_windows", schema+".rate_limit_windows", "api_calls", schema+".api_calls",
			"overrides", schema+".overrides", "gcra_buckets", schema+".gcra_buckets")
	}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&st.upsert, upsertSQL},
		{&st.count, countSQL},
		{&st.audit, auditSQL},
		{&st.window, windowSQL},
		{&st.state, stateSQL},
		{&st.tat, tatSQL},
	} {
		var err error
		if *p.stmt, err = db.PrepareContext(ctx, q.Replace(p.sql)); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
	}
	return nil
}

// in is st bound to tx.
func (st *statements) in(ctx context.Context, tx *sql.Tx) *statements {
	return &statements{
		upsert: tx.StmtContext(ctx, st.upsert), count: tx.StmtContext(ctx, st.count), audit: tx.StmtContext(ctx, st.audit),
		window: tx.StmtContext(ctx, st.window), state: tx.StmtContext(ctx, st.state),
		tat: tx.StmtContext(ctx, st.tat),
	}
}
