package service

import (
	"log/slog"
	"time"

	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// maxLogged bounds, in bytes, each value a client chooses that a log line
// repeats: the method, the path, the key (which limiter.ValidKey bounds
// tighter already) and each of func_error, which may repeat the request.
// A longer one is cut on a rune boundary and marked "…", and, but for
// func_error, its full length is logged beside it as method_bytes,
// path_bytes or key_bytes: a request of a 16 KiB path logs a line of a
// few KiB, not 16.
const maxLogged = 1 << 10

// log writes the request's one line: what it asked, what was decided,
// under which key and policies, how long it took, and any store error with
// its class. What the client chose is cut at maxLogged.
func (e *engine) log(req *request) {
	decision := req.decision
	switch {
	case req.cancelled():
		decision = "cancelled"
	case decision == "" && req.w.status >= 400:
		decision = "refused" // a problem before any decision: 400, 401, 404, ...
	}
	var attrs []slog.Attr
	attrs = logged(attrs, "method", req.r.Method)
	attrs = logged(attrs, "path", req.r.URL.Path)
	attrs = append(attrs, slog.Int("status", req.w.status))
	attrs = logged(attrs, "key", req.key)
	attrs = append(attrs,
		slog.String("decision", decision),
		slog.Float64("latency_ms", float64(time.Since(req.start).Microseconds())/1000),
		slog.String("request_id", req.caller.RequestID),
	)
	switch req.decision { // the count is known only when the store answered
	case "allowed", "rejected", "read":
		attrs = append(attrs, slog.Int64("count", req.count))
	}
	if req.fromMemory {
		attrs = append(attrs, slog.Bool("from_memory", true))
	}
	attrs = append(attrs, outcomeAttrs(req.outcome)...)
	if len(req.shadowSkipped) > 0 {
		attrs = append(attrs, slog.Any("shadow_skipped", req.shadowSkipped))
	}
	if len(req.funcErr) > 0 {
		errs := make([]string, len(req.funcErr))
		for i, err := range req.funcErr {
			errs[i] = truncate(err, maxLogged)
		}
		attrs = append(attrs, slog.Any("func_error", errs))
	}
	if req.admin != nil {
		attrs = append(attrs, slog.Any("admin", req.admin))
	}
	if req.caller.LambdaRequestID != "" {
		attrs = append(attrs, slog.String("lambda_request_id", req.caller.LambdaRequestID))
	}
	level := slog.LevelInfo
	switch {
	case req.cancelled():
		attrs = append(attrs, slog.String("error", req.err.Error()))
	case req.err != nil:
		// A fault that will not clear by itself (a corrupt file, a newer
		// schema) needs an operator: ERROR, where a busy lock is a WARN.
		fault := fault.Of(req.err)
		level = slog.LevelWarn
		if !fault.Transient() {
			level = slog.LevelError
		}
		attrs = append(attrs, slog.String("error", req.err.Error()), slog.String("fault", string(fault)))
	}
	e.opts.Logger.LogAttrs(req.r.Context(), level, "request", attrs...)
}

// logged appends the attribute name of value s, cut at maxLogged, and
// then name_bytes, s's full length, if it was cut.
func logged(attrs []slog.Attr, name, s string) []slog.Attr {
	attrs = append(attrs, slog.String(name, truncate(s, maxLogged)))
	if len(s) > maxLogged {
		attrs = append(attrs, slog.Int(name+"_bytes", len(s)))
	}
	return attrs
}

// outcomeAttrs are the log attributes of a decided outcome: every policy's
// decision when there are several, and the shadows that would have
// rejected the request.
func outcomeAttrs(o *limiter.Outcome) []slog.Attr {
	if o == nil {
		return nil
	}
	var attrs []slog.Attr
	var shadow []string
	ps := make([]any, len(o.Decisions))
	for i, d := range o.Decisions {
		ps[i] = map[string]any{"name": d.Policy.Name, "decision": decisionName(d), "count": d.Count}
		if decisionName(d) == metrics.ShadowRejected {
			shadow = append(shadow, d.Policy.Name)
		}
	}
	if len(ps) > 1 {
		attrs = append(attrs, slog.Any("policies", ps))
	}
	if len(shadow) > 0 {
		attrs = append(attrs, slog.Any("shadow_rejected", shadow))
	}
	return attrs
}

// decisionName is a policy's decision as metrics and logs name it.
func decisionName(d limiter.Decision) string {
	switch {
	case d.Allowed:
		return metrics.Allowed
	case d.Policy.Shadow:
		return metrics.ShadowRejected
	}
	return metrics.Rejected
}
