package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/limiter"
)

// Decisions across shards.
//
// A request whose charges fall into several shards (several policies, or
// key sources, whose keys hash apart) is decided in one transaction over
// all of them: on the connection of the lowest shard, the others are
// ATTACHed in ascending order, BEGIN IMMEDIATE takes the write lock of
// every one of them, and in a rollback journal SQLite commits them
// atomically through a super-journal: after a crash at any moment, every
// file holds the request's counts or none does.
//
// Two such requests cannot deadlock. Within the process, a cross-shard
// decision takes the turn (batch.go) of each of its shards in ascending
// order and holds them until it commits, and a batch holds one turn only.
// Between processes, BEGIN IMMEDIATE with SQLite's busy timeout at 0 takes
// every lock or none (a lock that is busy fails the BEGIN, which gives
// back what it took), so no process holds one file's lock while it waits
// for another's. A waiter watches the first file it finds locked, from
// that file's waiting room.

// allowAcross decides a, whose charges fall into the shards idx (ascending),
// in one transaction over them all.
func (s *Store) allowAcross(ctx context.Context, idx []int, a limiter.Attempt) (decide.Outcome, error) {
	shards := make([]*shard, 0, len(idx))
	defer func() {
		for _, sh := range shards {
			sh.batch.handOff()
		}
	}()
	for _, i := range idx {
		sh := s.shards[i]
		if p := newPending(ctx, limiter.Attempt{}, true); !sh.batch.turn(p) {
			return decide.Outcome{}, sh.wrap("decide", p.err)
		}
		shards = append(shards, sh)
	}
	var o decide.Outcome
	err := writeAcross(ctx, "decide", shards, func(at func(string) *statements) (err error) {
		o, err = decideTx(ctx, at, a)
		return err
	})
	if err != nil {
		return decide.Outcome{}, err
	}
	shards[0].batch.across.Add(1)
	return o, nil
}

// writeAcross runs fn in one immediate transaction over shards, retrying
// it while another process holds one of their locks, within the budget.
// Errors come back wrapped, with op and the paths.
// It holds a reference to every shard's handle meanwhile, so that none of
// their lock probes is closed (which would drop this process's locks on
// that file) while the transaction holds the file.
func writeAcross(ctx context.Context, op string, shards []*shard, fn func(at func(string) *statements) error) error {
	start := time.Now()
	for _, sh := range shards {
		if err := sh.ready(ctx); err != nil {
			return err
		}
	}
	gone := 0 // tries again after a rollback found its super-journal gone
	for {
		hs, err := acquireAll(ctx, shards)
		if err != nil && isBusy(err) && !shards[0].cfg.SQLiteBusyHandler {
			// A reopen found a file locked: wait as for a transaction.
			if err := shards[0].waitTurn(ctx, nil, start); err != nil {
				return wrapAcross(op, shards, err)
			}
			continue
		}
		if err == nil {
			err = txAcross(ctx, shards, hs, start, fn)
		}
		if err == nil {
			releaseAll(shards, hs)
			return nil
		}
		if hs != nil && needsReopen(err) {
			for i, sh := range shards {
				sh.drop(hs[i])
			}
		}
		if superJournalGone(err, shards[0].path) && gone < superJournalRetries {
			gone++
			releaseAll(shards, hs)
			continue
		}
		if hs == nil || !isBusy(err) || shards[0].cfg.SQLiteBusyHandler {
			releaseAll(shards, hs)
			return wrapAcross(op, shards, err)
		}
		err = waitAcross(ctx, shards, hs, start)
		releaseAll(shards, hs)
		if err != nil {
			return wrapAcross(op, shards, err)
		}
	}
}

func wrapAcross(op string, shards []*shard, err error) error {
	paths := make([]string, len(shards))
	for i, sh := range shards {
		paths[i] = sh.path
	}
	return fault.Failed(classOf(err), "sqlite: %s across %s: %w", op, strings.Join(paths, ", "), err)
}

// acquireAll acquires every shard's handle, or none.
func acquireAll(ctx context.Context, shards []*shard) ([]*handle, error) {
	hs := make([]*handle, 0, len(shards))
	for _, sh := range shards {
		h, err := sh.acquire(ctx)
		if err != nil {
			releaseAll(shards, hs)
			return nil, err
		}
		hs = append(hs, h)
	}
	return hs, nil
}

func releaseAll(shards []*shard, hs []*handle) {
	for i, h := range hs {
		shards[i].release(h)
	}
}

// waitAcross waits, from its waiting room, until the first of shards that
// another process holds looks free; where none looks held (a probe is
// missing, or the holder is this process), for one pause.
func waitAcross(ctx context.Context, shards []*shard, hs []*handle, start time.Time) error {
	for i, h := range hs {
		if p := h.lockProbe(); p != nil && p.writerActive() {
			p.enter()
			defer p.leave()
			return shards[i].waitTurn(ctx, p, start)
		}
	}
	return shards[0].waitTurn(ctx, nil, start)
}

// txAcross is one try of the transaction over shards, on the connection of
// the first, the others attached for as long as it runs.
func txAcross(ctx context.Context, shards []*shard, hs []*handle, start time.Time, fn func(at func(string) *statements) error) error {
	lo := shards[0]
	connCtx, cancel := context.WithDeadline(ctx, start.Add(lo.cfg.BusyTimeout))
	defer cancel()
	conn, err := hs[0].db.Conn(connCtx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := attach(ctx, conn, shards[1:]); err != nil {
		detach(conn, lo, hs[0], shards[1:])
		return err
	}
	defer detach(conn, lo, hs[0], shards[1:]) // after txOn's rollback
	return lo.txOn(ctx, conn, hs[0], start, func(tx *sql.Tx) error {
		// The first shard's are its handle's, prepared once on this
		// connection (unqualified names are main's, ahead of any attached
		// file's); the attached ones', for this transaction.
		sts := map[int]*statements{lo.index: hs[0].stmts.in(ctx, tx)}
		for _, sh := range shards[1:] {
			st := &statements{}
			if err := st.prepare(ctx, tx, schemaOf(sh)); err != nil {
				return err
			}
			sts[sh.index] = st
		}
		if err := fn(func(key string) *statements { return sts[shardIndex(key, lo.count)] }); err != nil {
			return err
		}
		return beforeCommit(lo.path)
	})
}

// schemaOf is the name sh's file is attached under.
func schemaOf(sh *shard) string { return "shard" + strconv.Itoa(sh.index) }

// attach attaches shards to conn, in ascending order, each in the
// configured journal mode and its synchronous level (the DSN's pragmas set
// only the main database's).
func attach(ctx context.Context, conn *sql.Conn, shards []*shard) error {
	for _, sh := range shards {
		name := schemaOf(sh)
		if _, err := conn.ExecContext(ctx, "ATTACH DATABASE ?1 AS "+name, sh.path); err != nil {
			return fmt.Errorf("attach %s: %w", sh.path, err)
		}
		var mode string
		if err := conn.QueryRowContext(ctx, "PRAGMA "+name+".journal_mode = "+sh.cfg.JournalMode).Scan(&mode); err != nil {
			return fmt.Errorf("journal mode of %s: %w", sh.path, err)
		}
		if !strings.EqualFold(mode, sh.cfg.JournalMode) {
			return fmt.Errorf("journal mode of %s is %q, not %q: %w", sh.path, mode, sh.cfg.JournalMode, errJournalMode)
		}
		if _, err := conn.ExecContext(ctx, "PRAGMA "+name+".synchronous = "+synchronous(sh.cfg.JournalMode)); err != nil {
			return fmt.Errorf("synchronous of %s: %w", sh.path, err)
		}
	}
	return nil
}

// detach detaches what attach attached. DETACH reads the schema of every
// attached file it has not read yet (after a BEGIN that found one locked,
// say), which needs a shared lock: it may wait for that, briefly, as a
// reader does. A connection that will not let go of an attached file must
// not serve that shard's own transactions (its BEGIN would lock the other
// file too): it is thrown away, and lo's handle h with it.
func detach(conn *sql.Conn, lo *shard, h *handle, shards []*shard) {
	ctx := context.Background()
	waiting := false
	failed := false
	for _, sh := range shards {
		_, err := conn.ExecContext(ctx, "DETACH DATABASE "+schemaOf(sh))
		if isBusy(err) && !waiting {
			waiting = true
			conn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(lo.cfg.BusyTimeout.Milliseconds(), 10))
			_, err = conn.ExecContext(ctx, "DETACH DATABASE "+schemaOf(sh))
		}
		if err != nil && !strings.Contains(err.Error(), "no such database") {
			failed = true
		}
	}
	if waiting && !lo.cfg.SQLiteBusyHandler {
		if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
			failed = true
		}
	}
	if failed {
		conn.Raw(func(any) error { return driver.ErrBadConn })
		lo.drop(h)
	}
}
