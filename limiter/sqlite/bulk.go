package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// Deciding a batch in bulk.
//
// A decision made alone costs two statements: its count (countSQL) and
// its audit record (auditSQL). Most of what a statement costs in the
// driver is the same whatever it does (the call, the binding, the VM's
// setup and reset), so a batch decided one attempt at a time spends most
// of its transaction on that. Consecutive attempts of a batch that
// countsInOne would count in one statement each, and whose charges all
// count in one window (one start, one length, one previous window), are
// decided together instead, in two statements however many they are:
//
//   - one upsert of a row per charge (bulkCountSQL) returns each row's new
//     count with what countSQL reads beside it: the previous window's
//     count and the key's override. Neither is a row the upsert writes
//     (every row it writes starts at the one window, and the previous one
//     starts before it), so each reads as it was before the attempts.
//   - the policies decide each attempt in turn, in Go, as decideTx would;
//   - one insert (bulkAuditSQL) writes the allowed ones' audit records, in
//     the attempts' order.
//
// Each attempt's counts are exactly those it would have had alone: every
// charge of a run adds one to its row, so the counts RETURNING gives a
// row, in whatever order SQLite emits them, are the row's count before
// the run plus one, two, and so on (saturating at decide.CountCap), and
// the smallest belongs to the first charge on that row in the batch's
// order, the next to the second, as if they had been counted one by one.
// Everything else (GCRA, costs, a run of one) is decided by decideTx.
// BenchmarkBatchOf16 and BENCHMARKS.md have what this saves.

// maxBulk bounds the rows of one bulk statement: 64 charges, 384
// parameters in the audit insert, far below SQLite's limit. A longer run
// is decided in several.
const maxBulk = 64

// bulkCountSQL is upsertSQL of n rows of one unit each, in the window
// starting at ?1 of ?2 seconds, capped at ?3, returning with each row's
// count the count of the window starting at ?4 (NULL: none) and the
// key's override limit (a window has no burst); the rows' keys are ?5
// onwards.
func bulkCountSQL(n int) string {
	return "INSERT INTO rate_limit_windows (key, window_start, count, window_seconds)\nVALUES " +
		tuples(n, func(i int) string { return "?" + strconv.Itoa(i+5) + ", ?1, 1, ?2" }) + `
ON CONFLICT (key, window_start) DO UPDATE SET count = min(count + excluded.count, ?3)
RETURNING key, count,
  (SELECT count FROM rate_limit_windows p WHERE p.key = rate_limit_windows.key AND p.window_start = ?4),
  (SELECT "limit" FROM overrides o WHERE o.key = rate_limit_windows.key)`
}

// bulkAuditSQL is auditSQL of n rows, six parameters each. They are
// anonymous (?), numbered in order as ?1 onwards would be: the driver
// asks SQLite each parameter's name as it binds it, and SQLite looks a
// numbered one up in a list of them all, so 384 numbered parameters cost
// some 74,000 steps a statement (1.4% of the local server's CPU in
// DELETE, more than the insert's own work), anonymous ones none.
func bulkAuditSQL(n int) string {
	return "INSERT INTO api_calls (key, window_start, called_at, route, request_id, cost)\nVALUES " +
		tuples(n, func(int) string { return "?, ?, ?, ?, ?, ?" })
}

// tuples is n rows of a VALUES clause, row(i) the values of the i-th.
func tuples(n int, row func(i int) string) string {
	r := make([]string, n)
	for i := range r {
		r[i] = "(" + row(i) + ")"
	}
	return strings.Join(r, ", ")
}

// bulkStatements are a handle's bulk statements, one of each size a run
// has needed. They are prepared outside any transaction (prepareWanted):
// the handle has one connection, which a transaction holds, and
// database/sql prepares a statement on a connection it takes from the
// pool. A run whose statement is not prepared yet is decided as if bulk
// did not exist, and asks for it.
type bulkStatements struct {
	mu           sync.Mutex
	count, audit bulkSizes
}

// bulkSizes are one bulk statement's sizes: those prepared, and those
// asked for.
type bulkSizes struct {
	stmt [maxBulk + 1]*sql.Stmt
	want [maxBulk + 1]bool
}

// get returns the statement of n rows of sizes, one of bs's, or nil,
// asking for it, when it is not prepared yet.
func (bs *bulkStatements) get(sizes *bulkSizes, n int) *sql.Stmt {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if sizes.stmt[n] == nil {
		sizes.want[n] = true
	}
	return sizes.stmt[n]
}

// wanted reports whether a statement has been asked for and not prepared.
func (bs *bulkStatements) wanted() bool {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return slices.Contains(bs.count.want[:], true) || slices.Contains(bs.audit.want[:], true)
}

// prepareWanted prepares on db the statements asked for since it last
// ran. It runs after a transaction, the connection back in the pool; an
// error (the handle closed meanwhile) leaves the statement wanted.
func (bs *bulkStatements) prepareWanted(ctx context.Context, db *sql.DB) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, k := range []struct {
		sizes *bulkSizes
		build func(int) string
	}{{&bs.count, bulkCountSQL}, {&bs.audit, bulkAuditSQL}} {
		for n, want := range k.sizes.want {
			if !want {
				continue
			}
			st, err := db.PrepareContext(ctx, k.build(n))
			if err != nil {
				return
			}
			k.sizes.stmt[n], k.sizes.want[n] = st, false
		}
	}
}

// bulkWindow is the window a bulk statement counts in.
type bulkWindow struct {
	start   string
	prev    any // previousStart's
	seconds int64
}

// bulkRun is how many of as, from the first, one bulk statement can
// decide: each counted in one statement (countsInOne), every charge in one
// window, maxBulk charges at most; and how many charges those have, and
// their window. Below two, as[0] is decided alone. It runs in the batch's
// transaction, so it tells windows apart by windowKey and formats the
// run's once.
func bulkRun(as []limiter.Attempt) (n, rows int, w bulkWindow) {
	var run windowKey
	var start time.Time
	var policy limiter.Policy
	for i, a := range as {
		if !countsInOne(a) || rows+len(a.Charges) > maxBulk {
			return i, rows, windowOf(rows, start, policy)
		}
		for j, c := range a.Charges {
			s := decide.WindowStart(a.Now, c.Policy.Window)
			switch k := windowKeyOf(s, c.Policy); {
			case rows+j == 0:
				run, start, policy = k, s, c.Policy
			case k != run:
				return i, rows, windowOf(rows, start, policy)
			}
		}
		rows += len(a.Charges)
	}
	return len(as), rows, windowOf(rows, start, policy)
}

// windowKey tells apart the windows a bulk statement counts in, as
// bulkWindow's strings would, without formatting them: the start's and
// (for a sliding window, previousStart's) previous start's seconds, which
// is what FormatWindow keeps of them, and the length in seconds.
type windowKey struct {
	start, prev, seconds int64
	sliding              bool
}

func windowKeyOf(start time.Time, p limiter.Policy) windowKey {
	k := windowKey{start: start.Unix(), seconds: decide.WindowSeconds(p), sliding: p.Algorithm == limiter.Sliding}
	if k.sliding {
		k.prev = start.Add(-p.Window).Unix()
	}
	return k
}

// windowOf is the bulkWindow of a run of rows charges whose first charge,
// of policy, counts in the window starting at start.
func windowOf(rows int, start time.Time, policy limiter.Policy) bulkWindow {
	if rows == 0 {
		return bulkWindow{}
	}
	return bulkWindow{decide.FormatWindow(start), previousStart(policy, start), decide.WindowSeconds(policy)}
}

// decideInOrder decides as in turn in tx, on h, each seeing the counts of
// those before it: runs of two or more that bulkRun finds in bulk, any
// other attempt alone with st (decideTx). It reports how many it decided
// in bulk.
func decideInOrder(ctx context.Context, tx *sql.Tx, h *handle, st *statements, as []limiter.Attempt) ([]decide.Outcome, int, error) {
	at := func(string) *statements { return st }
	outs := make([]decide.Outcome, len(as))
	bulked := 0
	for i := 0; i < len(as); {
		n, rows, w := bulkRun(as[i:])
		if n >= 2 {
			if count := h.bulk.get(&h.bulk.count, rows); count != nil {
				if err := h.bulk.decide(ctx, tx, st, count, w, as[i:i+n], outs[i:i+n]); err != nil {
					return nil, 0, err
				}
				i, bulked = i+n, bulked+n
				continue
			}
		}
		for range max(n, 1) {
			o, err := decideTx(ctx, at, as[i])
			if err != nil {
				return nil, 0, err
			}
			outs[i] = o
			i++
		}
	}
	return outs, bulked, nil
}

// bulkRow is what bulkCountSQL returned for one key: its rows' counts,
// smallest first, and what it read beside them.
type bulkRow struct {
	counts      []int64
	prev, limit sql.NullInt64
}

// decide decides as, a run bulkRun found in w, in tx, into outs (see the
// top of this file), counting with count, bulkCountSQL of their charges'
// number. As in decideTx, the statements run with ctx's values but not
// its cancellation, ctx checked before each.
func (bs *bulkStatements) decide(ctx context.Context, tx *sql.Tx, st *statements, count *sql.Stmt, w bulkWindow, as []limiter.Attempt, outs []decide.Outcome) error {
	sctx := context.WithoutCancel(ctx)
	rows, err := countRun(ctx, sctx, tx, count, w, as)
	if err != nil {
		return ended(ctx, err)
	}
	var audit []any
	for i, a := range as {
		b := a
		b.Charges = make([]limiter.Charge, len(a.Charges))
		states := make([]decide.State, len(a.Charges))
		for j, c := range a.Charges {
			r := rows[decide.StoreKey(c.Policy, c.Key)]
			if r == nil || len(r.counts) == 0 {
				return fmt.Errorf("bulk count: no count returned for key %q", c.Key)
			}
			c.Policy = decide.Effective(c, overrideOf(r.limit, sql.NullInt64{}))
			b.Charges[j], states[j] = c, decide.State{Cur: r.counts[0], Prev: r.prev.Int64}
			r.counts = r.counts[1:]
		}
		outs[i] = decide.Decide(b, states)
		if outs[i].Allowed {
			first := a.Charges[0]
			// w.start is every charge's window start (bulkRun).
			audit = append(audit, first.Key, w.start,
				a.Now.UTC().Format(decide.CalledAtLayout), a.Route, a.RequestID, decide.Units(first))
		}
	}
	if len(audit) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if stmt := bs.get(&bs.audit, len(audit)/6); stmt != nil {
		_, err = tx.StmtContext(ctx, stmt).ExecContext(sctx, audit...)
		return ended(ctx, err)
	}
	for i := 0; i < len(audit); i += 6 {
		if _, err := st.audit.ExecContext(sctx, audit[i:i+6]...); err != nil {
			return ended(ctx, err)
		}
	}
	return nil
}

// countRun runs count, bulkCountSQL in w, for the charges of as and
// returns its rows by store key.
func countRun(ctx, sctx context.Context, tx *sql.Tx, count *sql.Stmt, w bulkWindow, as []limiter.Attempt) (map[string]*bulkRow, error) {
	args := []any{w.start, w.seconds, decide.CountCap, w.prev}
	for _, a := range as {
		for _, c := range a.Charges {
			args = append(args, decide.StoreKey(c.Policy, c.Key))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rs, err := tx.StmtContext(ctx, count).QueryContext(sctx, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	byKey := make(map[string]*bulkRow, len(args)-4)
	for rs.Next() {
		var key string
		var count int64
		var r bulkRow
		if err := rs.Scan(&key, &count, &r.prev, &r.limit); err != nil {
			return nil, err
		}
		if byKey[key] == nil {
			byKey[key] = &r
		}
		byKey[key].counts = append(byKey[key].counts, count)
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	for _, r := range byKey {
		slices.Sort(r.counts)
	}
	return byKey, nil
}
