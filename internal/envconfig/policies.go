package envconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
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
	Limit     *whole   `json:"limit"`
	Window    string   `json:"window"`
	Algorithm string   `json:"algorithm"`
	Burst     *whole   `json:"burst"`
	Key       string   `json:"key"`
	Routes    []string `json:"routes"`
	Cost      *whole   `json:"cost"`
	Shadow    bool     `json:"shadow"`
	// Tiers and Tier are read member by member (tiersOf, tierSourceOf),
	// as strictly as the policy itself.
	Tiers json.RawMessage `json:"tiers"`
	Tier  json.RawMessage `json:"tier"`
}

// tierJSON is one tier of a POLICIES element's "tiers".
type tierJSON struct {
	Limit *whole `json:"limit"`
	Burst *whole `json:"burst"`
}

// whole is a whole-number member of POLICIES, in any form JSON writes one
// (100, 1e2, 100.0), as POST /check's cost and the admin routes' limit
// are read (strictjson.Whole). Anything else is the type error
// encoding/json gives an int64, which jsonProblem words.
type whole int64

// A whole number beyond int64 is the type error of a *beyond, which
// jsonProblem words as too large.
func (w *whole) UnmarshalJSON(b []byte) error {
	n, err := strictjson.Whole(b)
	switch {
	case errors.Is(err, strictjson.ErrRange):
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[*beyond]()}
	case err != nil:
		return &json.UnmarshalTypeError{Value: literalKind(b), Type: reflect.TypeFor[int64]()}
	}
	*w = whole(n)
	return nil
}

// beyond marks a whole number too large for any member of POLICIES.
type beyond struct{}

// literalKind is how encoding/json's type errors name a JSON literal:
// "string", "number 1.5", "bool", "array", "object".
func literalKind(b []byte) string {
	switch b[0] {
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case '[':
		return "array"
	case '{':
		return "object"
	}
	return "number " + string(b)
}

// int64Of is *w, or 0 for none.
func (w *whole) int64Of() int64 {
	if w == nil {
		return 0
	}
	return int64(*w)
}

// tierSourceJSON is a POLICIES element's "tier": where a request names
// its tier.
type tierSourceJSON struct {
	Source string `json:"source"`
	Claim  string `json:"claim"`
	Header string `json:"header"`
}

// ParseRules reads POLICIES: a JSON array of {"name", "limit", "window",
// "algorithm", "burst", "key", "routes", "cost", "shadow", "tiers",
// "tier"}. window is a duration ("60s", "24h") or days ("30d"); algorithm
// is fixed (default), sliding or gcra, and burst, for gcra only, how many
// may pass at once (default: limit); key a CLIENT_KEY_SOURCE (default:
// defaultKey); routes are ServeMux patterns, default [DefaultRoute]; cost
// what each request counts as, default 1. tiers are usage plans by name,
// each {"limit", "burst"} (burst for gcra only, default: the tier's
// limit), and tier where a request names its plan: {"source": "claim",
// "claim": NAME} or {"source": "header", "header": NAME}. A policy named
// DefaultPolicyName keeps the seed's counters, under the client key
// exactly; the others' are namespaced by their names. Every problem is
// reported, in the JSON's terms.
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
	p := limiter.Policy{Name: r.Name, Limit: r.Limit.int64Of(), Algorithm: limiter.Algorithm(r.Algorithm), Shadow: r.Shadow, Window: time.Second}
	if r.Limit == nil {
		bad(`limit is required, e.g. 100`)
		p.Limit = 1 // reported; check the rest
	}
	if p.Name != DefaultPolicyName {
		p.Namespace = p.Name
	}
	if r.Burst != nil {
		if p.Burst = r.Burst.int64Of(); p.Burst < 1 {
			bad("burst %d is below 1", p.Burst)
			p.Burst = 0 // reported; check the rest
		}
	}
	var cost int64 // zero: 1
	if r.Cost != nil {
		if cost = r.Cost.int64Of(); cost < 1 {
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
	rule := limiter.Rule{Policy: p, KeySource: ks, Routes: r.routes(bad), Cost: cost}
	return rule, append(errs, r.tiering(&rule)...)
}

// routes are the element's routes, [DefaultRoute] when it gives none,
// with what is wrong with them told to bad.
func (r ruleJSON) routes(bad func(format string, args ...any)) []string {
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
		// The service answers a HEAD as its GET: a route for HEAD alone
		// would count the HEADs and not the GETs they stand for.
		// ServeMux ends a pattern's method at a space or a tab.
		if r := strings.TrimSpace(route); strings.IndexAny(r, " \t") == len(http.MethodHead) && strings.HasPrefix(r, http.MethodHead) {
			bad("route %q: a HEAD is answered as its GET, and counted as one; write %q, which counts both", route, "GET "+strings.TrimSpace(r[len(http.MethodHead):]))
		}
	}
	return slices.Clone(routes)
}

// tiering sets rule's tiers and tier source from the element's "tiers"
// and "tier", and returns what JSON got wrong in them.
func (r ruleJSON) tiering(rule *limiter.Rule) []error {
	var errs []error
	if r.Tiers != nil {
		rule.Policy.Tiers, errs = tiersOf(r.Name, r.Tiers)
	}
	if r.Tier != nil {
		var err error
		if rule.TierClaim, rule.TierHeader, err = tierSourceOf(r.Tier); err != nil {
			errs = append(errs, fmt.Errorf("policy %q: tier: %v", r.Name, err))
		}
	}
	return errs
}

// tiersOf reads a policy's "tiers": an object of tiers by name, each
// {"limit", "burst"}, a name at most once. The limits and bursts are
// limiter.Policy.Validate's to check, with the policy's; what JSON can
// get wrong is reported here, each problem naming its tier.
func tiersOf(policy string, raw json.RawMessage) (map[string]limiter.Tier, []error) {
	names, values, err := strictjson.Members(raw)
	if err != nil {
		return nil, []error{fmt.Errorf(`policy %q: tiers: %s; tiers are an object of tiers by name, {"pro": {"limit": 1000}}`, policy, tierJSONProblem(err))}
	}
	if len(names) == 0 {
		return nil, []error{fmt.Errorf("policy %q: tiers is empty; leave it out for none", policy)}
	}
	var errs []error
	tiers := make(map[string]limiter.Tier, len(names))
	for i, name := range names {
		var t tierJSON
		if err := strictjson.Decode(values[i], &t); err != nil {
			errs = append(errs, fmt.Errorf("policy %q tier %q: %s", policy, name, tierJSONProblem(err)))
			continue
		}
		tier := limiter.Tier{Limit: t.Limit.int64Of()}
		if t.Limit == nil {
			errs = append(errs, fmt.Errorf("policy %q tier %q: limit is required, e.g. 1000", policy, name))
			tier.Limit = 1 // reported; check the rest
		}
		if t.Burst != nil {
			if tier.Burst = t.Burst.int64Of(); tier.Burst < 1 {
				errs = append(errs, fmt.Errorf("policy %q tier %q: burst %d is below 1", policy, name, tier.Burst))
				tier.Burst = 0 // reported; check the rest
			}
		}
		tiers[name] = tier
	}
	return tiers, errs
}

// tierSourceOf reads a policy's "tier": where a request names its tier,
// as the claim or header name it gives (at most one is set).
func tierSourceOf(raw json.RawMessage) (claim, header string, err error) {
	var s tierSourceJSON
	if err := strictjson.Decode(raw, &s); err != nil {
		return "", "", errors.New(tierJSONProblem(err))
	}
	switch s.Source {
	case "claim":
		if s.Claim == "" || s.Header != "" {
			return "", "", errors.New(`a claim source names its claim, and no header: {"source": "claim", "claim": "plan"}`)
		}
		return s.Claim, "", nil
	case "header":
		if s.Header == "" || s.Claim != "" {
			return "", "", errors.New(`a header source names its header, and no claim: {"source": "header", "header": "X-Plan"}`)
		}
		return "", s.Header, nil
	}
	return "", "", fmt.Errorf(`source %q is not claim or header`, s.Source)
}

// tierJSONProblem is jsonProblem for a tier or a tier source, where an
// object is not a policy.
func tierJSONProblem(err error) string {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) && typ.Field == "" {
		return fmt.Sprintf("found %s where an object belongs", typ.Value)
	}
	return jsonProblem(err)
}

// jsonProblem says what is wrong with a POLICIES value in its terms, not
// the decoder's Go types.
func jsonProblem(err error) string {
	var typ *json.UnmarshalTypeError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &typ) && typ.Field != "" && typ.Type == reflect.TypeFor[*beyond]():
		return strictjson.Beyond(typ.Field[strings.LastIndex(typ.Field, ".")+1:], typ.Value)
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
	if errors.As(err, &member) && member.Name == "window_seconds" && !member.Twice {
		// The and other limiters' spelling: POLICIES has one.
		return `unknown member "window_seconds": POLICIES writes a window as "window", a duration such as "60s" or "30d"`
	}
	if errors.As(err, &member) {
		return member.Error()
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// parseSpan reads a Go duration ("60s") or whole days ("30d"), either
// sign: the callers say what range their setting takes, in its terms, so
// that "0d" and "0s", or "-1d" and "-24h", get the same answer.
func parseSpan(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange) || err == nil && (n > maxDays || n < -maxDays):
			return 0, fmt.Errorf("%q is longer than the longest span, about 292 years", v)
		case err != nil:
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

// maxDays is the most whole days a time.Duration holds.
const maxDays = math.MaxInt64 / int64(24*time.Hour)

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
