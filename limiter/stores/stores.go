// Package stores opens the store a configuration names: SQLite, the
// default, or DynamoDB.
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

	"github.com/ft251/ratelimit/limiter"
)

// openers holds the stores compiled in, by limiter.StoreConfig.Kind.
var openers = map[limiter.StoreKind]func(context.Context, limiter.StoreConfig) (limiter.Store, error){}

// Open returns cfg's store, without reaching its data (see Ready). It fails
// for a configuration no store can serve: a kind this build lacks, a
// missing path or table, a path that is a directory.
func Open(ctx context.Context, cfg limiter.StoreConfig) (limiter.Store, error) {
	k := kind(cfg)
	open, ok := openers[k]
	if !ok {
		return nil, fmt.Errorf("stores: this build has no %s store (was it built with -tags no%s?)", k, k)
	}
	return open(ctx, cfg)
}

// OpenReady opens cfg's store and checks that it can serve, as a process
// does at start: a store that is unavailable for now (limiter.ErrUnavailable)
// is returned all the same, with one warning on log saying why, so that
// the process starts, answers with its fail mode and recovers by itself
// once the fault clears; any other failure is returned as an error, and
// the process should stop.
func OpenReady(ctx context.Context, cfg limiter.StoreConfig, log *slog.Logger) (limiter.Store, error) {
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

func kind(cfg limiter.StoreConfig) limiter.StoreKind {
	if cfg.Kind == "" {
		return limiter.StoreSQLite
	}
	return cfg.Kind
}
