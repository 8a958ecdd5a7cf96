package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// Allow counts the attempt under each charge and decides it, in one
// immediate transaction (see decideTx): the transaction of the one shard its
// charges fall into, shared with the attempts that wait for it (batch.go),
// or one over every shard they fall into (cross.go). No count is read and
// written back from Go, so concurrent processes cannot lose an increment,
// and an audit record exists exactly when its increments committed as
// allowed.
func (s *Store) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	if err := decide.Validate(a); err != nil {
		return limiter.Outcome{}, fmt.Errorf("sqlite: %w", err)
	}
	if err := s.first(ctx); err != nil {
		return limiter.Outcome{}, err
	}
	var o decide.Outcome
	var err error
	if idx := s.shardsOf(a); len(idx) > 1 {
		o, err = s.allowAcross(ctx, idx, a)
	} else {
		o, err = s.shardOf(a.Charges[0].Key).allow(ctx, a)
	}
	switch {
	case err != nil:
		return limiter.Outcome{}, err
	case o.Refused != nil:
		return limiter.Outcome{}, fmt.Errorf("sqlite: %w", o.Refused)
	}
	decide.Report(ctx, o)
	return o.Public(), nil
}

// decideTx decides a inside a write transaction, with the statements at
// gives for each client key (its shard's): for each charge, one read of the
// key's override and, for a sliding window, its previous window's count
// or, for GCRA, its bucket; and for a window one upsert that returns its
// count with this attempt's cost; then the policies decide, a GCRA bucket
// that moved is written back, and an allowed attempt's audit record is
// inserted in its first charge's shard. Several attempts decided one after
// another in one transaction each see the counts of those before. An
// attempt whose every charge is a window's, of one unit (most), has each
// charge's read and upsert in one statement (countCharges); any other is
// read first (readCharges), refused with nothing written if impossible,
// then counted (upsertCharges).
//
// The statements run with ctx's values but not its cancellation (ctx is
// checked before each instead): inside the transaction, which holds the
// write lock, none waits for a lock, and a context that can end costs
// each statement a goroutine in the driver to interrupt what takes
// microseconds. The transaction itself is begun with ctx, and rolled back
// when ctx ends.
func decideTx(ctx context.Context, at func(key string) *statements, a limiter.Attempt) (decide.Outcome, error) {
	sctx := context.WithoutCancel(ctx)
	var b limiter.Attempt
	var states []decide.State
	var err error
	if countsInOne(a) {
		b, states, err = countCharges(ctx, sctx, at, a)
	} else if b, states, err = readCharges(ctx, sctx, at, a); err == nil {
		if refused := decide.Impossible(b); refused != nil {
			return decide.Outcome{Refused: refused}, nil // nothing written: the batch goes on
		}
		err = upsertCharges(ctx, sctx, at, b, states)
	}
	if err != nil {
		return decide.Outcome{}, err
	}
	o := decide.Decide(b, states)
	for i, d := range o.Decisions {
		if !d.Moved {
			continue
		}
		if err := ctx.Err(); err != nil {
			return decide.Outcome{}, err
		}
		if _, err := at(d.Key).tat.ExecContext(sctx, decide.StoreKey(b.Charges[i].Policy, d.Key), d.TAT.UnixNano(), int64(decide.Emission(d.Policy))); err != nil {
			return decide.Outcome{}, ended(ctx, err)
		}
	}
	if !o.Allowed {
		return o, nil
	}
	if err := ctx.Err(); err != nil {
		return decide.Outcome{}, err
	}
	first := a.Charges[0]
	_, err = at(first.Key).audit.ExecContext(sctx, first.Key,
		decide.FormatWindow(decide.WindowStart(a.Now, first.Policy.Window)),
		a.Now.UTC().Format(decide.CalledAtLayout), a.Route, a.RequestID, decide.Units(first))
	return o, ended(ctx, err)
}

// upsertCharges counts each window check of b, as readCharges returned
// it, with one upsert that leaves its count with this attempt's in states.
func upsertCharges(ctx, sctx context.Context, at func(key string) *statements, b limiter.Attempt, states []decide.State) error {
	for i, c := range b.Charges {
		if c.Policy.Algorithm == limiter.GCRA {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		start := decide.WindowStart(b.Now, c.Policy.Window)
		err := at(c.Key).upsert.QueryRowContext(sctx, decide.StoreKey(c.Policy, c.Key), decide.FormatWindow(start), decide.Units(c), decide.WindowSeconds(c.Policy), decide.CountCap).Scan(&states[i].Cur)
		if err != nil {
			return ended(ctx, err)
		}
	}
	return nil
}

// countsInOne reports whether each of a's checks can be counted and read
// in one statement (countSQL): a window's, of one unit. No override or
// tier sets a limit or a burst below one, so such an attempt is never
// impossible, and nothing needs to be read before it is counted. Not
// where two checks count on one store key with windows of two lengths:
// the one counted first may have counted in the window the other reads as
// its previous one, which must be read as it was before the attempt.
func countsInOne(a limiter.Attempt) bool {
	for i, c := range a.Charges {
		if c.Policy.Algorithm == limiter.GCRA || decide.Units(c) != 1 {
			return false
		}
		for _, d := range a.Charges[:i] {
			if d.Policy.Window != c.Policy.Window && decide.StoreKey(d.Policy, d.Key) == decide.StoreKey(c.Policy, c.Key) {
				return false
			}
		}
	}
	return true
}

// countCharges counts each of a's checks (countsInOne) and reads its
// previous window's count and its key's override, in one statement each.
func countCharges(ctx, sctx context.Context, at func(key string) *statements, a limiter.Attempt) (limiter.Attempt, []decide.State, error) {
	return eachCharge(ctx, sctx, at, a, countWindow)
}

// readCharges reads, on sctx, what each of a's charges needs to be decided
// (see decideTx), before anything is counted.
func readCharges(ctx, sctx context.Context, at func(key string) *statements, a limiter.Attempt) (limiter.Attempt, []decide.State, error) {
	return eachCharge(ctx, sctx, at, a, func(ctx context.Context, st *statements, c limiter.Charge, start time.Time) (readOf, error) {
		if c.Policy.Algorithm == limiter.GCRA {
			return readState(ctx, st, c.Policy, decide.StoreKey(c.Policy, c.Key), start)
		}
		return readWindow(ctx, st, c.Policy, decide.StoreKey(c.Policy, c.Key), start)
	})
}

// eachCharge runs read, on sctx, for each of a's charges at the start of
// its window, and returns a with its charges' policies as their tiers and
// their keys' overrides make them (decide.Effective), and the states read.
func eachCharge(ctx, sctx context.Context, at func(key string) *statements, a limiter.Attempt,
	read func(context.Context, *statements, limiter.Charge, time.Time) (readOf, error)) (limiter.Attempt, []decide.State, error) {
	charges := make([]limiter.Charge, len(a.Charges))
	states := make([]decide.State, len(a.Charges))
	for i, c := range a.Charges {
		if err := ctx.Err(); err != nil {
			return a, nil, err
		}
		r, err := read(sctx, at(c.Key), c, decide.WindowStart(a.Now, c.Policy.Window))
		if err != nil {
			return a, nil, ended(ctx, err)
		}
		c.Policy = decide.Effective(c, r.override)
		charges[i], states[i] = c, r.State
	}
	a.Charges = charges
	return a, states, nil
}

// countWindow counts c in its window from start with countSQL, and reads
// back the count with c's, the previous window's and c's key's override.
func countWindow(ctx context.Context, st *statements, c limiter.Charge, start time.Time) (readOf, error) {
	var r readOf
	var prev, limit, burst sql.NullInt64
	err := st.count.QueryRowContext(ctx, decide.StoreKey(c.Policy, c.Key), decide.FormatWindow(start), decide.Units(c), decide.WindowSeconds(c.Policy), decide.CountCap, previousStart(c.Policy, start)).
		Scan(&r.Cur, &prev, &limit, &burst)
	r.Prev, r.override = prev.Int64, overrideOf(limit, burst)
	return r, err
}

// ended is err, or ctx's error when ctx ended while the statement ran: the
// transaction was rolled back under it, and the error says so only
// indirectly.
func ended(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// readOf is what windowSQL or stateSQL read of one store key.
type readOf struct {
	decide.State
	override *limiter.Override
}

// overrideOf is the override whose columns read limit and burst: none
// when the row is missing (limit NULL).
func overrideOf(limit, burst sql.NullInt64) *limiter.Override {
	if !limit.Valid {
		return nil
	}
	return &limiter.Override{Limit: limit.Int64, Burst: burst.Int64}
}

// readWindow reads what a decision under the window policy p needs of key
// before its count: its override and, if p slides, its count in the window
// before start.
func readWindow(ctx context.Context, st *statements, p limiter.Policy, key string, start time.Time) (readOf, error) {
	var prev, limit, burst sql.NullInt64
	if err := st.window.QueryRowContext(ctx, key, previousStart(p, start)).Scan(&prev, &limit, &burst); err != nil {
		return readOf{}, err
	}
	r := readOf{State: decide.State{Prev: prev.Int64}}
	r.override = overrideOf(limit, burst)
	return r, nil
}

// previousStart is the start of the window before start that a decision
// under p weighs, formatted as the counters store it: for a sliding window,
// and none (NULL, which matches no row) for a fixed one.
func previousStart(p limiter.Policy, start time.Time) any {
	if p.Algorithm != limiter.Sliding {
		return nil
	}
	return decide.FormatWindow(start.Add(-p.Window))
}

// readState reads key's override, its count in the window before start
// (and in the one from start, for Usage) and its GCRA bucket.
func readState(ctx context.Context, st *statements, p limiter.Policy, key string, start time.Time) (readOf, error) {
	var cur, prev, limit, burst, tat, emission sql.NullInt64
	err := st.state.QueryRowContext(ctx, key, decide.FormatWindow(start), decide.FormatWindow(start.Add(-p.Window))).
		Scan(&cur, &prev, &limit, &burst, &tat, &emission)
	if err != nil {
		return readOf{}, err
	}
	r := readOf{State: decide.State{Cur: cur.Int64}}
	if p.Algorithm == limiter.Sliding {
		r.Prev = prev.Int64
	}
	if tat.Valid {
		r.TAT, r.Emission = time.Unix(0, tat.Int64), time.Duration(emission.Int64)
	}
	r.override = overrideOf(limit, burst)
	return r, nil
}

// Usage reads key's standing under p at now, with its override, in one
// statement in autocommit mode on its shard: it takes only a shared lock
// and writes nothing.
func (s *Store) Usage(ctx context.Context, p limiter.Policy, key string, now time.Time) (limiter.Usage, error) {
	if err := decide.TargetAt(p, key, now); err != nil {
		return limiter.Usage{}, fmt.Errorf("sqlite: %w", err)
	}
	// A read waits for the lock (a commit in progress) or this process's
	// connection no longer than a write would.
	ctx, cancel := context.WithTimeout(ctx, s.cfg.BusyTimeout)
	defer cancel()
	var r readOf
	sh, err := s.route(ctx, key)
	if err == nil {
		err = sh.do(ctx, "read count", func(h *handle) (err error) {
			r, err = readState(ctx, &h.stmts, p, decide.StoreKey(p, key), decide.WindowStart(now, p.Window))
			return err
		})
	}
	if err != nil && !s.noDatabaseYet(sh) {
		return limiter.Usage{}, err
	}
	return decide.Usage(decide.Effective(limiter.Charge{Policy: p}, r.override), key, now, r.State), nil
}

// noDatabaseYet reports, for a read-only store, that the file of sh (or,
// when the call failed before it had a shard, shard 0's) does not exist but
// its directory does: no writer has counted anything there yet, so every
// count is 0. (A missing directory is a mount or path fault, and stays
// one.)
func (s *Store) noDatabaseYet(sh *shard) bool {
	if !s.cfg.ReadOnly {
		return false
	}
	path := s.path
	if sh != nil {
		path = sh.path
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	fi, err := os.Stat(filepath.Dir(path))
	return err == nil && fi.IsDir()
}
