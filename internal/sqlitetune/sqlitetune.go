// Package sqlitetune carries the SQLite store's measuring knobs, which are
// not a user's configuration: loadtest and the store's own benchmarks set
// them, on the context given to sqlite.Open, to measure what the store's
// defaults buy.
package sqlitetune

import "context"

// Options are the knobs. The zero Options are the store's defaults.
type Options struct {
	// SQLiteBusyHandler leaves waiting for other processes' locks to
	// SQLite's own busy handler instead of the store's fairer one
	// (loadtest -busy-handler sqlite).
	SQLiteBusyHandler bool
	// MaxBatch bounds how many decisions of one process the store decides
	// in one transaction (group commit); zero means its default, and 1
	// decides each in a transaction of its own (loadtest -batch).
	MaxBatch int
}

type key struct{}

// With returns ctx carrying o, for sqlite.Open.
func With(ctx context.Context, o Options) context.Context {
	return context.WithValue(ctx, key{}, o)
}

// From is what ctx carries; the zero Options when nothing.
func From(ctx context.Context) Options {
	o, _ := ctx.Value(key{}).(Options)
	return o
}
