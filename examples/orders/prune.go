package main

import (
	"context"
	"log"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// auditRetention is how long the audit rows of allowed requests are kept.
const auditRetention = 30 * 24 * time.Hour

// pruneEvery is how often the server deletes what its file no longer
// needs, as the deployed stack's prune function does for its own.
const pruneEvery = 5 * time.Minute

// prune deletes what store no longer needs at now: the counters whose
// window ended a window ago, the GCRA buckets that have drained, and the
// audit rows older than auditRetention. Without it the file grows with
// every window and every allowed request. Outside Lambda, main runs it
// every pruneEvery; in Lambda, where nothing runs between requests,
// template.yaml's PruneFunction (the limiter's own prune function, pointed
// at this file) runs it on a schedule.
func prune(ctx context.Context, store limiter.Store, now time.Time) (limiter.Pruned, error) {
	return store.Prune(ctx, now, now.Add(-auditRetention))
}

// pruneLoop runs prune every pruneEvery, for as long as the process.
func pruneLoop(store limiter.Store) {
	for range time.Tick(pruneEvery) {
		if _, err := prune(context.Background(), store, time.Now()); err != nil {
			log.Printf("prune: %v", err)
		}
	}
}
