package stores

import (
	"context"
	"errors"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

func init() {
	kinds[SQLite] = store{
		open: func(ctx context.Context, cfg Config) (limiter.Store, error) {
			s, err := sqlite.Open(ctx, SQLiteConfig(cfg))
			if err != nil { // not a nil *sqlite.Store in a non-nil interface
				return nil, err
			}
			return s, nil
		},
		validate: func(cfg Config) []*FieldError {
			return fieldErrors(SQLiteConfig(cfg).Validate(), func(err error) *FieldError {
				if e := (*sqlite.ConfigError)(nil); errors.As(err, &e) {
					return &FieldError{Field: e.Field, Problem: e.Problem}
				}
				return &FieldError{Field: "Path", Problem: err.Error()}
			})
		},
	}
}

// SQLiteConfig is cfg as the SQLite store takes it.
func SQLiteConfig(cfg Config) sqlite.Config {
	return sqlite.Config{Path: cfg.Path, Shards: cfg.Shards, JournalMode: cfg.JournalMode, BusyTimeout: cfg.BusyTimeout, ReadOnly: cfg.ReadOnly}
}

// fieldErrors is each error joined in err, as a store's FieldError.
func fieldErrors(err error, each func(error) *FieldError) []*FieldError {
	if err == nil {
		return nil
	}
	var out []*FieldError
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			out = append(out, each(e))
		}
		return out
	}
	return []*FieldError{each(err)}
}
