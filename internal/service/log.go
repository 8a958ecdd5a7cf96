package service

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/ft251/ratelimit/internal/fault"
	"github.com/ft251/ratelimit/internal/jsonlog"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// maxLogged bounds, in bytes, each value a client chooses that a log line
// repeats: the method, the path, the key (which limiter.ValidKey bounds
// tighter already) and each of func_error, which may repeat the request,
// as the line writes them (escapes included, see jsonlog.Cut). A longer one
// is cut on a rune boundary and marked "…", and, but for
// func_error, its full length is logged beside it as method_bytes,
// path_bytes or key_bytes: a request of a 16 KiB path logs a line of a
// few KiB, not 16.
const maxLogged = 1 << 10

// A verdict is what became of a request, as its log line and metrics say.
type verdict string

// Verdicts. The empty verdict is a request that ended before any: logged
// as refused (a problem before any decision: 400, 401, 404, ...) or
// cancelled (the client went away).
const (
	allowed   verdict = "allowed"
	rejected  verdict = "rejected"
	read      verdict = "read"      // /status, or an admin read
	degraded  verdict = "degraded"  // the store failed, and FAIL_MODE=open let it through
	uncounted verdict = "uncounted" // no policy counts it
	failed    verdict = "error"     // the store failed: 503
	admin     verdict = "admin"     // an admin action done
	refused   verdict = "refused"
	cancelled verdict = "cancelled"
)

// line is a request's one log line: what it asked, what became of it,
// under which key, tier and policies, how long it took, and any store
// error with its class. What the client chose is cut at maxLogged (a tier
// is a configured name or "default", never the client's).
type line struct {
	method, path, key string
	tier              string // the first policy's, for one with tiers
	status            int
	verdict           verdict
	latency           time.Duration
	requestID         string
	lambdaRequestID   string
	count             *int64 // when the store answered
	fromMemory        bool
	outcome           *limiter.Outcome
	shadowSkipped     []string
	funcErr           []string
	admin             map[string]any
	err               error
	cancelled         bool
	bug               bool // answered 500 by the service, not the handler behind: logged at ERROR
	panicked          bool // the handler behind panicked
}

// lineOf is req's log line.
func lineOf(req *request) line {
	l := line{method: req.r.Method, path: req.r.URL.Path, key: req.key, tier: req.tier, status: req.w.status, verdict: req.verdict,
		latency: time.Since(req.start), requestID: req.caller.RequestID, lambdaRequestID: req.caller.LambdaRequestID,
		fromMemory: req.fromMemory, outcome: req.outcome, shadowSkipped: req.shadowSkipped, funcErr: req.funcErr,
		admin: req.admin, err: req.err, cancelled: req.cancelled(), panicked: req.panicked,
		// Only a bug of ours, or of a function the caller gave us, answers
		// 500 (writeError); the handler behind the middleware may, for
		// its own reasons.
		bug: req.w.status == http.StatusInternalServerError && !req.passed}
	switch {
	case l.cancelled:
		l.verdict = cancelled
	case l.verdict == "" && l.status >= 400:
		l.verdict = refused
	}
	switch req.verdict {
	case allowed, rejected, read:
		l.count = &req.count
	}
	return l
}

// log writes req's line: at ERROR for a store fault that will not clear
// by itself (a corrupt file, a newer schema: an operator is needed), WARN
// for one that may (a busy lock), else INFO.
func (e *engine) log(req *request) {
	l := lineOf(req)
	level := slog.LevelInfo
	if l.err != nil && !l.cancelled {
		level = slog.LevelWarn
		if !fault.Of(l.err).Transient() {
			level = slog.LevelError
		}
	}
	if l.bug {
		level = slog.LevelError
	}
	// The handler is called as Logger.LogAttrs would call it, without the
	// caller's program counter: LogAttrs reads the stack for a source
	// (this line, of no use to anyone) on every request.
	h, ctx := e.opts.Logger.Handler(), req.r.Context()
	if !h.Enabled(ctx, level) {
		return
	}
	rec := slog.NewRecord(time.Now(), level, "request", 0)
	rec.AddAttrs(l.attrs()...)
	_ = h.Handle(ctx, rec) // as LogAttrs, which drops the handler's error
}

// attrs are l's attributes, in the line's order.
func (l line) attrs() []slog.Attr {
	// Room for a decided request's line at once: grown from nothing it
	// was five allocations and four copies on every request.
	attrs := make([]slog.Attr, 0, 12)
	attrs = logged(attrs, "method", l.method)
	attrs = logged(attrs, "path", l.path)
	attrs = append(attrs, slog.Int("status", l.status))
	attrs = logged(attrs, "key", l.key)
	if l.tier != "" {
		attrs = append(attrs, slog.String("tier", l.tier))
	}
	attrs = append(attrs,
		slog.String("decision", string(l.verdict)),
		slog.Float64("latency_ms", float64(l.latency.Microseconds())/1000),
		slog.String("request_id", l.requestID),
	)
	if l.count != nil {
		attrs = append(attrs, slog.Int64("count", *l.count))
	}
	if l.fromMemory {
		attrs = append(attrs, slog.Bool("from_memory", true))
	}
	attrs = append(attrs, outcomeAttrs(l.outcome)...)
	if len(l.shadowSkipped) > 0 {
		attrs = append(attrs, slog.Any("shadow_skipped", l.shadowSkipped))
	}
	if len(l.funcErr) > 0 {
		errs := make([]string, len(l.funcErr))
		for i, err := range l.funcErr {
			errs[i], _ = jsonlog.Cut(err, maxLogged)
		}
		attrs = append(attrs, slog.Any("func_error", errs))
	}
	if l.admin != nil {
		attrs = append(attrs, slog.Any("admin", l.admin))
	}
	if l.panicked {
		attrs = append(attrs, slog.Bool("panic", true))
	}
	if l.lambdaRequestID != "" {
		attrs = append(attrs, slog.String("lambda_request_id", l.lambdaRequestID))
	}
	switch {
	case l.cancelled:
		attrs = append(attrs, slog.String("error", l.err.Error()))
	case l.err != nil && l.bug:
		attrs = append(attrs, slog.String("error", l.err.Error())) // a bug's cause (a wrong clock), no store's fault
	case l.err != nil:
		attrs = append(attrs, slog.String("error", l.err.Error()), slog.String("fault", string(fault.Of(l.err))))
	}
	return attrs
}

// logged appends the attribute name of value s, cut at maxLogged, and
// then name_bytes, s's full length, if it was cut.
func logged(attrs []slog.Attr, name, s string) []slog.Attr {
	v, cut := jsonlog.Cut(s, maxLogged)
	attrs = append(attrs, slog.String(name, v))
	if cut {
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
	for _, d := range o.Decisions {
		if decisionName(d) == metrics.ShadowRejected {
			shadow = append(shadow, d.Policy.Name)
		}
	}
	// Only several policies are listed, and only then built: a map a
	// policy, on every request, was most of the line's allocations.
	if len(o.Decisions) > 1 {
		ps := make([]any, len(o.Decisions))
		for i, d := range o.Decisions {
			p := map[string]any{"name": d.Policy.Name, "decision": decisionName(d), "count": d.Count}
			if tier := tierLabel(d.Usage); tier != "" {
				p["tier"] = tier
			}
			ps[i] = p
		}
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
