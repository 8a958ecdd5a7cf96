package awslambda

import (
	"context"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// PruneResult is what the prune function returns and logs.
type PruneResult struct {
	limiter.Pruned
	// Now is the instant pruned against; AuditBefore the audit cutoff, empty
	// when audit rows are kept forever.
	Now         string `json:"now"`
	AuditBefore string `json:"audit_before,omitempty"`
}

// PruneHandler is the Lambda handler of the scheduled prune function.
type PruneHandler func(context.Context, events.EventBridgeEvent) (PruneResult, error)

// Prune handles the EventBridge scheduled event: it deletes the windows that
// ended more than one window length before the event's time, and audit rows
// older than retention (none when retention is zero).
//
// It logs one line, at debug when it deleted nothing (see
// decide.PruneLevel).
//
// The event's time is used so that a delayed or retried invocation prunes as
// of its schedule, but never later than now(): a hand-made event from the
// future must not delete live windows. A zero or 1970 time, which `sam local
// generate-event` writes, means now().
func Prune(store limiter.Store, retention time.Duration, now func() time.Time, log *slog.Logger) PruneHandler {
	return func(ctx context.Context, e events.EventBridgeEvent) (PruneResult, error) {
		clock := now()
		at := e.Time
		if at.Unix() <= 0 || at.After(clock) {
			at = clock
		}
		auditBefore := decide.AuditBefore(at, retention)
		pruned, err := store.Prune(ctx, at, auditBefore)
		res := PruneResult{Pruned: pruned, Now: at.UTC().Format(time.RFC3339)}
		if !auditBefore.IsZero() {
			res.AuditBefore = auditBefore.UTC().Format(time.RFC3339)
		}
		attrs := []any{"windows_deleted", pruned.Windows, "buckets_deleted", pruned.Buckets, "audit_deleted", pruned.Audit, "super_journals_deleted", pruned.SuperJournals, "now", res.Now, "audit_before", res.AuditBefore}
		if err != nil {
			attrs = append(attrs, "error", err.Error())
		}
		log.Log(ctx, decide.PruneLevel(pruned, err), "prune", attrs...)
		return res, err
	}
}
