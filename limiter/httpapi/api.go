// Package httpapi is the HTTP contract of the rate limiter: GET /ping, limited
// per client key, and GET /status, which reads a key's counter. The same
// handler serves the Lambda functions (through the API Gateway proxy, see
// limiter/awslambda) and the local server, so both answer alike.
//
// Every error is answered with RFC 9457 Problem Details, written in one place
// (writeError); no request path panics or leaks internals, and a panic that
// escapes a bug anyway is recovered into a 500 problem.
package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// Routes served by the API.
const (
	RoutePing   = limiter.DefaultRoute
	RouteStatus = "/status"
)

// Metrics records what the API decides; *metrics.EMF writes it as
// CloudWatch Embedded Metric Format lines.
type Metrics interface {
	// Decision records one policy's decision of one request, and how long
	// the store took (metrics.NoLatency for a decision made from memory).
	Decision(at time.Time, policy, route, decision string, latency time.Duration)
	// StoreError records a request the store failed to decide, with the
	// failure's class (limiter.Fault).
	StoreError(at time.Time, route string, fault limiter.Fault)
}

var _ Metrics = (*metrics.EMF)(nil)

// Options configure an API.
type Options struct {
	Store limiter.Store
	// Rules are the policies that apply to requests, and how each finds
	// its key; at least one must apply to /ping.
	Rules []limiter.Rule
	// Metrics receives what the API decides; nil records nothing.
	Metrics Metrics
	// FailMode says what /ping answers when the store fails.
	FailMode limiter.FailMode
	// Routes lists the routes to serve (RoutePing, RouteStatus); others
	// answer 404. Empty means all.
	Routes []string
	// Now reads the clock, once per request. Defaults to time.Now.
	Now func() time.Time
	// Caller tells what the platform knows about a request. Defaults to
	// what a direct TCP connection tells.
	Caller func(*http.Request) Caller
	// Logger receives one line per request. Defaults to slog.Default().
	Logger *slog.Logger
}

// API serves the rate-limited routes.
type API struct {
	opts      Options
	routes    map[string]func(*request) error
	pingRules []limiter.Rule // the rules that apply to /ping, in order
}

// New returns the API described by opts. It panics if a policy is invalid,
// none applies to /ping, or a route is unknown: all are fixed in main, not
// at run time.
func New(opts Options) *API {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Caller == nil {
		opts.Caller = localCaller
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if len(opts.Routes) == 0 {
		opts.Routes = []string{RoutePing, RouteStatus}
	}
	a := &API{opts: opts, routes: map[string]func(*request) error{}}
	// A bad policy or route is a programming error in main, found at start.
	for _, r := range opts.Rules {
		if err := r.Policy.Validate(); err != nil {
			panic("httpapi: " + err.Error())
		}
		if slices.Contains(r.Routes, RoutePing) {
			a.pingRules = append(a.pingRules, r)
		}
	}
	if len(a.pingRules) == 0 {
		panic("httpapi: no policy applies to " + RoutePing)
	}
	for _, route := range opts.Routes {
		switch route {
		case RoutePing:
			a.routes[route] = a.ping
		case RouteStatus:
			a.routes[route] = a.status
		default:
			panic("httpapi: unknown route " + route)
		}
	}
	return a
}

// request is one request in flight, with what its log line reports.
type request struct {
	w      *recorder
	r      *http.Request
	caller Caller
	now    time.Time
	status int

	key        string
	decision   string // allowed, rejected, read, degraded, or empty
	count      int64
	fromMemory bool             // a rejection made without the store (limiter.RejectCache)
	outcome    *limiter.Outcome // every policy's decision, when the store answered
	err        error            // the store's error, logged but never sent
	// shadowSkipped names the shadow policies left out of the request
	// because they could not find their key in it.
	shadowSkipped []string
}

// ServeHTTP routes the request, answers errors with Problem Details, and
// logs one line.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req := &request{w: &recorder{ResponseWriter: w}, r: r, caller: a.opts.Caller(r), now: a.opts.Now()}
	if req.caller.RequestID == "" {
		req.caller.RequestID = newRequestID()
	}
	defer func() {
		if v := recover(); v != nil {
			a.opts.Logger.Error("panic", "panic", v, "stack", string(debug.Stack()))
			if !req.w.wrote { // else the client already has its answer
				req.fail(nil)
			}
		}
		a.log(req, time.Since(start))
	}()

	handle, ok := a.routes[r.URL.Path]
	var err error
	switch {
	case !ok:
		err = problem(http.StatusNotFound, TypeBlank, "No route for "+truncate(r.URL.Path, 200)+".")
	case r.Method != http.MethodGet:
		p := problem(http.StatusMethodNotAllowed, TypeBlank, r.URL.Path+" accepts GET only.")
		p.header.Set("Allow", http.MethodGet)
		err = p
	default:
		err = handle(req)
	}
	if err != nil {
		req.fail(err)
	}
}

// fail answers with the problem err describes.
func (req *request) fail(err error) {
	req.status = writeError(req.w, req.r, err)
}

// ok answers 200 with v as JSON.
func (req *request) ok(v any) error {
	req.status = http.StatusOK
	writeJSON(req.w, "application/json", http.StatusOK, v)
	return nil
}

func (a *API) log(req *request, latency time.Duration) {
	attrs := []slog.Attr{
		slog.String("method", req.r.Method),
		slog.String("path", req.r.URL.Path),
		slog.Int("status", req.status),
		slog.String("key", req.key),
		slog.String("decision", req.decision),
		slog.Float64("latency_ms", float64(latency.Microseconds())/1000),
		slog.String("request_id", req.caller.RequestID),
	}
	switch req.decision { // the count is known only when the store answered
	case "allowed", "rejected", "read":
		attrs = append(attrs, slog.Int64("count", req.count))
	}
	if req.fromMemory {
		attrs = append(attrs, slog.Bool("from_memory", true))
	}
	if o := req.outcome; o != nil {
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
	}
	if len(req.shadowSkipped) > 0 {
		attrs = append(attrs, slog.Any("shadow_skipped", req.shadowSkipped))
	}
	if req.caller.LambdaRequestID != "" {
		attrs = append(attrs, slog.String("lambda_request_id", req.caller.LambdaRequestID))
	}
	level := slog.LevelInfo
	if req.err != nil {
		// A fault that will not clear by itself (a corrupt file, a newer
		// schema) needs an operator: ERROR, where a busy lock is a WARN.
		fault := limiter.FaultOf(req.err)
		level = slog.LevelWarn
		if !fault.Transient() {
			level = slog.LevelError
		}
		attrs = append(attrs, slog.String("error", req.err.Error()), slog.String("fault", string(fault)))
	}
	a.opts.Logger.LogAttrs(req.r.Context(), level, "request", attrs...)
}

// recorder notes whether a response has been started, so that a panic
// after it does not write a second one.
type recorder struct {
	http.ResponseWriter
	wrote bool
}

func (w *recorder) WriteHeader(status int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// newRequestID makes an id for requests that arrive without one.
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
