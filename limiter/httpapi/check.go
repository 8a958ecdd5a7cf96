package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// MaxCheckBody bounds a POST /check body.
const MaxCheckBody = 64 << 10

// checkRoute names /check in audit records and metrics.
const checkRoute = http.MethodPost + " " + RouteCheck

// checkRequest is POST /check's body.
type checkRequest struct {
	Key      *string         `json:"key"`
	Cost     json.RawMessage `json:"cost"`
	Policies *[]string       `json:"policies"`
}

// checkBody is POST /check's answer, 200 for both outcomes: the limited
// party is the caller's client, so a denial is data, not a 429.
type checkBody struct {
	Allowed    bool              `json:"allowed"`
	Degraded   bool              `json:"degraded,omitempty"`
	Key        string            `json:"key"`
	Cost       int64             `json:"cost"`
	RetryAfter int64             `json:"retry_after"`
	Policies   []checkPolicyBody `json:"policies"`
}

// checkPolicyBody is one checked policy's standing; with the store down
// (FAIL_MODE=open), its counts are null: nothing is known.
type checkPolicyBody struct {
	Name         string `json:"name"`
	Algorithm    string `json:"algorithm"`
	Limit        int64  `json:"limit"`
	Remaining    *int64 `json:"remaining"`
	ResetSeconds *int64 `json:"reset_seconds"`
	Denied       bool   `json:"denied"`
	Shadow       bool   `json:"shadow,omitempty"`
}

// check decides, for a service in any language, whether its client key
// may proceed at a cost: POST /check {"key", "cost", "policies"}. The key
// comes from the body alone: the caller is trusted to name it (the route
// is IAM-authorized when deployed). Without "policies", every policy whose
// routes match POST /check applies. The cost is counted under each policy
// in one transaction, denied or not, as /ping counts its 1.
func (a *API) check(req *request) error {
	in, err := readCheck(req)
	if err != nil {
		return err
	}
	a2, err := a.checkAttempt(req, in)
	if err != nil {
		return err
	}
	req.key = a2.Checks[0].Key
	o, err := a.decide(req, checkRoute, a2.Checks)
	if err != nil {
		if a.opts.FailMode == limiter.FailOpen {
			req.decision = "degraded"
			return req.ok(degradedCheck(a2))
		}
		req.decision = "error"
		return storeUnavailable(a2.Checks[0].Policy.Window)
	}
	setRateLimitHeaders(req.w.Header(), req.now, o.Decisions)
	body := checkBody{Allowed: o.Allowed, Key: req.key, Cost: a2.Checks[0].Units()}
	if !o.Allowed {
		body.RetryAfter = int64(max(o.RetryAfter(), time.Second) / time.Second)
	}
	for _, d := range o.Decisions {
		remaining, reset := d.Remaining, int64(d.ResetAfter.Seconds())
		body.Policies = append(body.Policies, checkPolicyBody{
			Name: d.Policy.Name, Algorithm: d.Policy.Algorithm.String(), Limit: d.Policy.Limit,
			Remaining: &remaining, ResetSeconds: &reset, Denied: !d.Allowed && !d.Policy.Shadow, Shadow: d.Policy.Shadow,
		})
	}
	return req.ok(body)
}

// readCheck reads and checks the body: JSON (no other media type), one
// object, no unknown members, at most MaxCheckBody bytes.
func readCheck(req *request) (checkRequest, error) {
	var in checkRequest
	if ct := req.r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			p := problem(http.StatusUnsupportedMediaType, TypeInvalidRequest, "The body must be application/json.")
			p.header.Set("Accept-Post", "application/json")
			return in, p
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(req.w, req.r.Body, MaxCheckBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return in, badCheck(fmt.Sprintf("the body is over %d bytes", MaxCheckBody))
	case err != nil:
		return in, badCheck("the body could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, badCheck(checkJSONProblem(err))
	}
	if dec.More() {
		return in, badCheck("the body holds more than one JSON value")
	}
	return in, nil
}

// checkJSONProblem says what is wrong with a /check body in its terms.
func checkJSONProblem(err error) string {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Sprintf("%q must not be %s", typ.Field, typ.Value)
	case errors.As(err, &typ):
		return "the body must be a JSON object, not " + typ.Value
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.Is(err, io.EOF):
		return "the body is empty; it must be a JSON object such as {\"key\": \"user-42\"}"
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown member " + f + "; members are key, cost, policies"
	}
	return "invalid JSON"
}

// checkAttempt is the attempt the body asks for, or a 400 problem saying
// why not.
func (a *API) checkAttempt(req *request, in checkRequest) (limiter.Attempt, error) {
	if in.Key == nil {
		return limiter.Attempt{}, badCheck(`"key" is required`)
	}
	var cost int64 = 1
	if in.Cost != nil {
		if err := json.Unmarshal(in.Cost, &cost); err != nil || cost < 1 {
			return limiter.Attempt{}, badCheck(fmt.Sprintf(`"cost" must be a whole number of at least 1, not %s`, in.Cost))
		}
	}
	var names []string
	switch {
	case in.Policies != nil && len(*in.Policies) == 0:
		return limiter.Attempt{}, badCheck(`"policies" is empty: name at least one, or leave it out`)
	case in.Policies != nil:
		names = *in.Policies
	default:
		for _, r := range a.checkRules {
			names = append(names, r.Policy.Name)
		}
		if len(names) == 0 {
			return limiter.Attempt{}, badCheck(`no policy guards POST /check: name "policies"`)
		}
	}
	lim := limiter.Limiter{Store: a.opts.Store, Policies: a.policies()}
	att, err := lim.Attempt(req.r.Context(), req.now, limiter.Request{Key: strings.Trim(*in.Key, " \t"), Cost: cost, Policies: names,
		Route: checkRoute, RequestID: req.caller.RequestID})
	switch {
	case errors.Is(err, limiter.ErrInvalidKey):
		return att, invalidKey(err)
	case errors.Is(err, limiter.ErrUnknownPolicy) || errors.Is(err, limiter.ErrInvalidCost):
		return att, badCheck(err.Error())
	case err != nil: // the store, reading an override
		req.err, req.decision = err, "error"
		return att, storeUnavailable(time.Minute)
	}
	return att, nil
}

// policies are every configured policy, in order.
func (e *engine) policies() []limiter.Policy {
	out := make([]limiter.Policy, len(e.rules))
	for i, r := range e.rules {
		out[i] = r.Policy
	}
	return out
}

// degradedCheck is the answer with the store down and FAIL_MODE=open:
// allowed, and nothing known.
func degradedCheck(a limiter.Attempt) checkBody {
	body := checkBody{Allowed: true, Degraded: true, Key: a.Checks[0].Key, Cost: a.Checks[0].Units()}
	for _, c := range a.Checks {
		body.Policies = append(body.Policies, checkPolicyBody{Name: c.Policy.Name, Algorithm: c.Policy.Algorithm.String(), Limit: c.Policy.Limit, Shadow: c.Policy.Shadow})
	}
	return body
}

func badCheck(why string) *Problem {
	return problem(http.StatusBadRequest, TypeInvalidRequest, "The check is not acceptable: "+why+".")
}
