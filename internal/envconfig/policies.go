package envconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/strictjson"
	"github.com/ft251/ratelimit/limiter"
)

// DefaultPolicyName names the seed's policy, from RATE_LIMIT and
// WINDOW_SECONDS. Its counters are stored under the client key exactly.
const DefaultPolicyName = "ping"

// DefaultRoute is the route a POLICIES rule limits when it names none: the
// seed's one rate-limited route. (A limiter.Rule built in Go must name its own.)
const DefaultRoute = service.RoutePing

// ruleJSON is one element of POLICIES.
type ruleJSON struct {
	Name      string   `json:"name"`
	Limit     int64    `json:"limit"`
	Window    string   `json:"window"`
	Algorithm string   `json:"algorithm"`
	Burst     *int64   `json:"burst"`
	Key       string   `json:"key"`
	Routes    []string `json:"routes"`
	Cost      *int64   `json:"cost"`
	Shadow    bool     `json:"shadow"`
}

// ParseRules reads POLICIES: a JSON array of {"name", "limit", "window",
// "algorithm", "burst", "key", "routes", "cost", "shadow"}. window is a
// duration ("60s", "24h") or days ("30d"); algorithm is fixed (default),
// sliding or gcra, and burst, for gcra only, how many may pass at once
// (default: limit); key a CLIENT_KEY_SOURCE (default: defaultKey); routes
// are ServeMux patterns, default [DefaultRoute]; cost what each request
// counts as, default 1. A policy named DefaultPolicyName keeps the seed's
// counters, under the client key exactly; the others' are namespaced by
// their names. Every problem is reported, in the JSON's terms.
func ParseRules(v string, defaultKey limiter.KeySource) ([]limiter.Rule, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal([]byte(v), &elems); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return nil, fmt.Errorf("found %s; POLICIES is a JSON array of policies, [{...}, ...]", typ.Value)
		}
		return nil, fmt.Errorf("not a JSON array of policies: %v", jsonProblem(err))
	}
	if len(elems) == 0 {
		return nil, errors.New("no policies")
	}
	var errs []error
	rules := make([]limiter.Rule, 0, len(elems))
	for i, elem := range elems {
		var r ruleJSON
		if err := strictjson.Decode(elem, &r); err != nil {
			errs = append(errs, fmt.Errorf("policy %d: %v", i+1, jsonProblem(err)))
			continue
		}
		rule, problems := r.rule(defaultKey)
		rules = append(rules, rule)
		errs = append(errs, problems...)
	}
	errs = append(errs, limiter.ValidateRules(rules))
	return rules, errors.Join(errs...)
}

// rule turns one POLICIES element into a limiter.Rule, with the problems
// JSON can have; ValidateRules finds the others.
func (r ruleJSON) rule(defaultKey limiter.KeySource) (limiter.Rule, []error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("policy %q: "+format, append([]any{r.Name}, args...)...))
	}
	p := limiter.Policy{Name: r.Name, Limit: r.Limit, Algorithm: limiter.Algorithm(r.Algorithm), Shadow: r.Shadow, Window: time.Second}
	if p.Name != DefaultPolicyName {
		p.Namespace = p.Name
	}
	if r.Burst != nil {
		if p.Burst = *r.Burst; p.Burst < 1 {
			bad("burst %d is below 1", p.Burst)
			p.Burst = 0 // reported; check the rest
		}
	}
	var cost int64 // zero: 1
	if r.Cost != nil {
		if cost = *r.Cost; cost < 1 {
			bad("cost %d is below 1", cost)
			cost = 0
		}
	}
	switch w, err := parseSpan(r.Window); {
	case r.Window == "":
		bad(`window is required, e.g. "60s" or "1d"`)
	case err != nil:
		bad("window: %v", err)
	case w < time.Second || w > limiter.MaxWindow || w%time.Second != 0:
		bad("window %q: must be whole seconds from 1s to 30d", r.Window)
	default:
		p.Window = w
	}
	ks := defaultKey
	if r.Key != "" {
		var err error
		if ks, err = ParseKeySource(r.Key); err != nil {
			bad("key: %v", err)
			ks = defaultKey
		}
	}
	routes := r.Routes
	switch {
	case routes != nil && len(routes) == 0:
		bad(`routes is empty; leave it out for ["%s"]`, DefaultRoute)
	case routes == nil:
		routes = []string{DefaultRoute}
	}
	for _, route := range routes {
		if strings.TrimSpace(route) == "" {
			bad("a route is empty")
		}
	}
	return limiter.Rule{Policy: p, KeySource: ks, Routes: slices.Clone(routes), Cost: cost}, errs
}

// jsonProblem says what is wrong with a POLICIES value in its terms, not
// the decoder's Go types.
func jsonProblem(err error) string {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &typ) && typ.Field != "":
		want := map[reflect.Kind]string{reflect.String: "a string", reflect.Int64: "a whole number",
			reflect.Bool: "true or false", reflect.Slice: "an array"}[typ.Type.Kind()]
		if want == "" {
			want = "a " + typ.Type.Kind().String()
		}
		return fmt.Sprintf("%q must be %s, not %s", typ.Field, want, typ.Value)
	case errors.As(err, &typ):
		return fmt.Sprintf("found %s where a policy object belongs", typ.Value)
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d: %v", syn.Offset, syn)
	}
	var member *strictjson.MemberError
	if errors.As(err, &member) {
		return member.Error()
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// parseSpan reads a Go duration ("60s") or whole days ("30d").
func parseSpan(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 1 || n > 36500 {
			return 0, fmt.Errorf("%q is not a whole number of days", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration such as 60s or 24h, nor days such as 30d", v)
	}
	return d, nil
}

// KeySourceString writes k as CLIENT_KEY_SOURCE spells it.
func KeySourceString(k limiter.KeySource) string {
	if k.Kind == limiter.KeyFromClaim {
		return string(limiter.KeyFromClaim) + ":" + k.Claim
	}
	return string(k.Kind)
}

// ParseKeySource reads "header", "source-ip" or "claim:NAME".
func ParseKeySource(s string) (limiter.KeySource, error) {
	var k limiter.KeySource
	switch claim, isClaim := strings.CutPrefix(s, string(limiter.KeyFromClaim)+":"); {
	case s == string(limiter.KeyFromHeader) || s == string(limiter.KeyFromSourceIP):
		k = limiter.KeySource{Kind: limiter.KeyKind(s)}
	case isClaim && claim != "":
		k = limiter.KeySource{Kind: limiter.KeyFromClaim, Claim: claim}
	default:
		return limiter.KeySource{}, fmt.Errorf("%q is not header, source-ip or claim:NAME", s)
	}
	return k, k.Validate()
}
