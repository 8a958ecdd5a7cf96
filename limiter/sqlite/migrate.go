package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"time"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrations returns the embedded migrations in order; migration i (from 0)
// brings the schema from user_version i to i+1.
func migrations() ([]string, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for i, name := range names {
		b, err := migrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out[i] = string(b)
	}
	return out, nil
}

// SchemaVersion is the user_version this binary's migrations reach.
func SchemaVersion() int {
	m, _ := migrations()
	return len(m)
}

// prepare brings a writer's file up to date: its schema migrated and its
// place in the layout recorded (checkLayout). The common case, a file
// already prepared, costs reads and no lock beyond a shared one.
// Otherwise both changes are made in one immediate transaction that reads
// the version and layout again first, so that a new file costs its
// creator one commit, which the cold starts racing it wait for, and two
// racing apply each migration once: the second waits for the first's lock
// and then, reading again without the lock, finds nothing left to do (see
// opening.writeOnce). Migrations are also written to be idempotent (IF NOT
// EXISTS) in case a database was built by hand.
func (sh *shard) prepare(ctx context.Context, db *sql.DB, o *opening) error {
	var v int
	var all []string
	needed := func(q querier) (bool, error) {
		var err error
		if v, all, err = versions(ctx, q); err != nil {
			return false, err
		}
		if v < len(all) {
			return true, nil // the layout is read once the schema has its table
		}
		found, err := sh.compareLayout(ctx, q)
		return err == nil && !found, err
	}
	return o.writeOnce(ctx, db, "migration", needed, func(tx *sql.Tx) error {
		if err := migrate(ctx, tx, v, all); err != nil {
			return err
		}
		return sh.recordLayout(ctx, tx)
	})
}

// migrate runs migrations v+1 onwards of all in tx, and records the
// version they reach.
func migrate(ctx context.Context, tx *sql.Tx, v int, all []string) error {
	if v == len(all) {
		return nil
	}
	for ; v < len(all); v++ {
		if _, err := tx.ExecContext(ctx, all[v]); err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	// PRAGMA takes no bound parameters; v is an int we computed.
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	return nil
}

// opening is one attempt of a shard's open: the budget it waits for locks
// within, from start (BusyTimeout, as for any call), and the lock probe it
// waits with, once the file has one.
//
// Its reads wait for a commit in progress inside SQLite (busy_timeout, up
// to what is left of the budget): a commit holds the lock for a moment, and
// once it has begun no new reader is let in, so readers cannot starve it.
// A schema change (writeOnce) takes the write lock the store's way instead:
// BEGIN IMMEDIATE fails at once when another process holds it, and the
// store watches the lock until it looks free (wait.go).
type opening struct {
	sh    *shard
	start time.Time
	probe *probe
}

// execer is a database, connection or transaction to run a statement on.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// busyTimeout sets how long SQLite waits for a lock on q's connection,
// unless SQLite's busy handler waits for every lock anyway
// (SQLiteBusyHandler, whose busy timeout the DSN sets).
func (o *opening) busyTimeout(ctx context.Context, q execer, d time.Duration) error {
	if o.sh.cfg.SQLiteBusyHandler {
		return nil
	}
	_, err := q.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.FormatInt(d.Milliseconds(), 10))
	return err
}

// left is what is left of the budget, at least a millisecond.
func (o *opening) left() time.Duration {
	return max(o.sh.cfg.BusyTimeout-time.Since(o.start), time.Millisecond)
}

// readsWait makes the reads on db wait for a commit in progress. db has
// one connection (open sets it so), which keeps the setting.
//
// It is the first statement on a new handle's connection, which is when
// SQLite opens the file: its error is the open's (a missing directory,
// a file that is not a database), told as it is, under the caller's
// "open PATH"; it used to say "set busy timeout", which was not what
// failed.
func (o *opening) readsWait(ctx context.Context, db *sql.DB) error {
	return o.busyTimeout(ctx, db, o.left())
}

// done leaves db's connection as the store's calls expect it: not waiting
// inside SQLite (wait.go).
func (o *opening) done(ctx context.Context, db *sql.DB) error {
	if err := o.busyTimeout(ctx, db, 0); err != nil {
		return fmt.Errorf("set busy timeout: %w", err)
	}
	return nil
}

// writeOnce makes a change to the file that racing cold starts must make
// once, such as a migration. needed reports, read without the write lock,
// whether the change is still to be made; if so, change makes it in an
// immediate transaction that reads needed again first. A cold start that
// finds the write lock taken (most likely by another making the same
// change) waits until it looks free and reads again without it: once the
// other has committed, it finds nothing left to do, rather than take the
// write lock in its turn, after every other, only to find that.
func (o *opening) writeOnce(ctx context.Context, db *sql.DB, what string, needed func(querier) (bool, error), change func(*sql.Tx) error) error {
	for {
		if err := o.readsWait(ctx, db); err != nil {
			return err
		}
		need, err := needed(db)
		if err != nil || !need {
			return err
		}
		err = o.writeTx(ctx, db, what, needed, change)
		if !isBusy(err) || o.sh.cfg.SQLiteBusyHandler {
			return err
		}
		if err := o.sh.waitTurn(ctx, o.probe, o.start); err != nil {
			return err
		}
	}
}

// writeTx is one try of writeOnce's transaction. Its BEGIN does not wait;
// the rest, its COMMIT above all, which must wait for readers to finish,
// waits up to what is left of the budget.
func (o *opening) writeTx(ctx context.Context, db *sql.DB, what string, needed func(querier) (bool, error), change func(*sql.Tx) error) error {
	if err := o.busyTimeout(ctx, db, 0); err != nil {
		return fmt.Errorf("set busy timeout: %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin %s: %w", what, err)
	}
	defer tx.Rollback() // after Commit, a no-op
	if err := o.busyTimeout(ctx, tx, o.left()); err != nil {
		return fmt.Errorf("set busy timeout: %w", err)
	}
	if need, err := needed(tx); err != nil || !need {
		return err
	}
	if err := change(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %s: %w", what, err)
	}
	return nil
}

// checkVersion is migrate for a read-only store, which cannot migrate: it
// fails until a writer has brought the schema to this binary's version.
func checkVersion(ctx context.Context, db *sql.DB) error {
	v, all, err := versions(ctx, db)
	if err == nil && v < len(all) {
		err = fmt.Errorf("schema version %d is older than this binary's %d; a writer (ping or prune) migrates it", v, len(all))
	}
	return err
}

// versions reads the schema's user_version and this binary's migrations,
// and refuses a schema newer than the binary: it would not know the tables.
func versions(ctx context.Context, db querier) (int, []string, error) {
	all, err := migrations()
	if err != nil {
		return 0, nil, fmt.Errorf("read migrations: %w", err)
	}
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, nil, fmt.Errorf("read schema version: %w", err)
	}
	if v > len(all) {
		return 0, nil, fmt.Errorf("schema version %d is newer than this binary's %d: %w", v, len(all), errSchema)
	}
	return v, all, nil
}
