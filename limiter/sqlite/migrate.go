package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
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

// migrate brings the schema up to date. The common case, an up-to-date
// schema, costs one read and no lock beyond a shared one. Otherwise the
// migrations run in one immediate transaction that re-reads the version
// first, so two cold starts racing apply each migration once: the second
// waits for the first's lock and then finds nothing left to do. Migrations
// are also written to be idempotent (IF NOT EXISTS) in case a database was
// built by hand.
func migrate(ctx context.Context, db *sql.DB) error {
	v, all, err := versions(ctx, db)
	if err != nil || v == len(all) {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
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
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migration: %w", err)
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
func versions(ctx context.Context, db *sql.DB) (int, []string, error) {
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
