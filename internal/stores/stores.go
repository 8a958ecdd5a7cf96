// Package stores opens the store a configuration names: SQLite, the
// default, DynamoDB, or memory (one process's, for the local server), and
// checks such a configuration as the store's own Open would.
//
// Each store registers itself from a file of its own, so that a build can
// leave one out: `-tags nodynamodb` drops the DynamoDB store and the AWS SDK
// with it, which keeps a SQLite-only function about 3.8 MB smaller
// (BENCHMARKS.md, "What the SDK costs").
package stores

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// Kind names a store.
type Kind string

// Stores a Config can name (STORE).
const (
	SQLite   Kind = "sqlite"
	DynamoDB Kind = "dynamodb"
	// Memory counts in this process alone (limiter/memory): exact for one
	// long-running server, and no store for Lambda, where an execution
	// environment is one process of many.
	Memory Kind = "memory"
)

// Config says which store keeps the counters, and the settings of each.
type Config struct {
	// Kind is SQLite (the default, also when empty), DynamoDB or Memory.
	Kind Kind
	// Path, Shards and JournalMode are SQLite's (sqlite.Config).
	Path        string
	Shards      int
	JournalMode string
	// Table and Endpoint are DynamoDB's (dynamodb.Config).
	Table, Endpoint string
	// BusyTimeout bounds each wait for a lock, or for DynamoDB to accept a
	// write that conflicted or was throttled.
	BusyTimeout time.Duration
	// AuditRetention is how long audit records are kept; zero keeps them
	// forever. SQLite's prune deletes older ones; DynamoDB's records carry
	// it as their time to live.
	AuditRetention time.Duration
	// ReadOnly opens the store for reading only, as the status function
	// does on its read-only mount.
	ReadOnly bool
}

// A FieldError is one thing wrong with a Config: the field the store's own
// configuration names, and what.
type FieldError struct {
	Field   string // "Path", "Shards", "JournalMode", "BusyTimeout", "Table", "Endpoint"
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// kinds holds the stores compiled in, by Kind.
var kinds = map[Kind]store{}

// store is how a kind of store opens and checks a Config.
type store struct {
	open     func(context.Context, Config) (limiter.Store, error)
	validate func(Config) []*FieldError
}

// Validate reports what the store cfg names would refuse at Open, one
// *FieldError a problem (a path that is a directory is seen on the file
// system), or that this build has no such store.
func Validate(cfg Config) []error {
	k, ok := kinds[kind(cfg)]
	if !ok {
		return []error{missing(cfg)}
	}
	var errs []error
	for _, e := range k.validate(cfg) {
		errs = append(errs, e)
	}
	return errs
}

// Open returns cfg's store, without reaching its data (see Ready). It fails
// for a configuration no store can serve: a kind this build lacks, a
// missing path or table, a path that is a directory.
func Open(ctx context.Context, cfg Config) (limiter.Store, error) {
	k, ok := kinds[kind(cfg)]
	if !ok {
		return nil, missing(cfg)
	}
	return k.open(ctx, cfg)
}

// OpenReady opens cfg's store and checks that it can serve, as a process
// does at start: a store that is unavailable for now (limiter.ErrUnavailable)
// is returned all the same, with one warning on log saying why, so that
// the process starts, answers with its fail mode and recovers by itself
// once the fault clears; any other failure is returned as an error, and
// the process should stop.
func OpenReady(ctx context.Context, cfg Config, log *slog.Logger) (limiter.Store, error) {
	s, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	switch err := s.Ready(ctx); {
	case errors.Is(err, limiter.ErrUnavailable):
		log.Warn("store not ready; answering with the fail mode until it is", "store", string(kind(cfg)), "error", err.Error())
	case err != nil:
		s.Close()
		return nil, err
	}
	return s, nil
}

func kind(cfg Config) Kind {
	if cfg.Kind == "" {
		return SQLite
	}
	return cfg.Kind
}

func missing(cfg Config) error {
	k := kind(cfg)
	return fmt.Errorf("stores: this build has no %s store (was it built with -tags no%s?)", k, k)
}
