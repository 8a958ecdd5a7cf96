package limiter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults for the settings ConfigFromEnv reads.
const (
	DefaultLimit       = 3
	DefaultWindow      = 60 * time.Second
	DefaultBusyTimeout = 3 * time.Second
	DefaultJournalMode = "DELETE"
	// DefaultLocalDBPath is where the local server keeps its database.
	DefaultLocalDBPath = "./data/ratelimit.db"
	// PingPolicyName names the /ping policy in RateLimit-Policy headers.
	PingPolicyName = "ping"
	// MaxBusyTimeout keeps the lock wait inside the functions' 10 s timeout
	// (and API Gateway's 30 s), with time left to answer.
	MaxBusyTimeout = 9 * time.Second
	// DefaultAddr and DefaultPruneInterval are the local server's.
	DefaultAddr          = "127.0.0.1:3000"
	DefaultPruneInterval = time.Minute
)

// Config is the service's configuration, read from the environment.
type Config struct {
	// Limit and Window define the /ping policy (RATE_LIMIT, WINDOW_SECONDS).
	Limit  int64
	Window time.Duration
	// KeySource says where the client key comes from (CLIENT_KEY_SOURCE).
	KeySource KeySource
	// FailMode says what /ping answers when the store fails (FAIL_MODE).
	FailMode FailMode
	// AuditRetention is how long audit records are kept; zero keeps them
	// forever (AUDIT_RETENTION).
	AuditRetention time.Duration
	// RejectCache answers keys already denied in the current window from
	// this process's memory (REJECT_CACHE=on); see RejectCache.
	RejectCache bool
	// Rules are the policies applied to requests (POLICIES; without it,
	// the /ping policy from RATE_LIMIT and WINDOW_SECONDS). With SHADOW=on
	// every one is a shadow.
	Rules []Rule
	// Metrics says whether to write CloudWatch EMF lines (METRICS=emf, the
	// functions' default, or off, the local server's), under
	// MetricsNamespace (METRICS_NAMESPACE).
	Metrics          bool
	MetricsNamespace string
	// Store says where the counters live.
	Store StoreConfig

	// Addr and PruneInterval are the local server's (ADDR,
	// PRUNE_INTERVAL); LocalConfigFromEnv reads them.
	Addr          string
	PruneInterval time.Duration
}

// Stores a Config can name (STORE).
const (
	StoreSQLite   = "sqlite"
	StoreDynamoDB = "dynamodb"
)

// StoreConfig says which store keeps the counters, and tunes it.
type StoreConfig struct {
	// Kind is StoreSQLite (the default) or StoreDynamoDB (STORE).
	Kind string
	// Table and Endpoint locate the DynamoDB table (TABLE_NAME, and
	// DYNAMODB_ENDPOINT to use a local implementation); region and
	// credentials come from the AWS SDK's usual chain.
	Table    string
	Endpoint string

	// Path is the SQLite database file (DB_PATH).
	Path string
	// JournalMode is the rollback-journal mode (JOURNAL_MODE): DELETE,
	// TRUNCATE or PERSIST. WAL is accepted only by the local server: its
	// index lives in shared memory on one host, and every Lambda execution
	// environment is a host of its own.
	JournalMode string
	// BusyTimeout bounds each wait for the database lock, or for DynamoDB
	// to accept a write that conflicted or was throttled (BUSY_TIMEOUT).
	BusyTimeout time.Duration
	// AuditRetention is Config.AuditRetention again, for the stores that
	// expire audit records themselves (DynamoDB's TTL).
	AuditRetention time.Duration
	// ReadOnly opens the database for reading only, as the status function
	// does on its read-only mount: no migrations, no writes.
	ReadOnly bool
	// SQLiteBusyHandler leaves waiting for other processes' locks to
	// SQLite's own busy handler instead of the store's fairer one. It exists
	// to measure the difference (cmd/loadtest -busy-handler sqlite).
	SQLiteBusyHandler bool
}

// PingPolicy is the seed's policy of GET /ping, from RATE_LIMIT and
// WINDOW_SECONDS. Its counters are stored under the client key exactly.
func (c Config) PingPolicy() Policy {
	return Policy{Name: PingPolicyName, Limit: c.Limit, Window: c.Window}
}

// Rule is a policy and where it applies: the routes it limits and how each
// request's key is found.
type Rule struct {
	Policy    Policy
	KeySource KeySource
	Routes    []string
}

// RateLimitedRoutes are the routes rules may limit.
var RateLimitedRoutes = []string{"/ping"}

// ruleJSON is one element of POLICIES.
type ruleJSON struct {
	Name      string   `json:"name"`
	Limit     int64    `json:"limit"`
	Window    string   `json:"window"`
	Algorithm string   `json:"algorithm"`
	Key       string   `json:"key"`
	Routes    []string `json:"routes"`
	Shadow    bool     `json:"shadow"`
}

// parseRules reads POLICIES: a JSON array of
// {"name", "limit", "window", "algorithm", "key", "routes", "shadow"}.
// window is a duration ("60s", "24h") or days ("30d"); algorithm is fixed
// (default) or sliding; key a CLIENT_KEY_SOURCE (default: CLIENT_KEY_SOURCE);
// routes default to ["/ping"]. A policy named "ping" keeps the seed's
// counters, under the client key exactly; the others' are namespaced by
// their names.
func parseRules(v string, defaultKey KeySource) ([]Rule, error) {
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
	seen := map[string]bool{}
	rules := make([]Rule, len(elems))
	for i, elem := range elems {
		var r ruleJSON
		dec := json.NewDecoder(bytes.NewReader(elem))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			errs = append(errs, fmt.Errorf("policy %d: %v", i+1, jsonProblem(err)))
			continue
		}
		if r.Window == "" {
			errs = append(errs, fmt.Errorf("policy %q: window is required, e.g. \"60s\" or \"1d\"", r.Name))
			r.Window = "1s" // reported; check the rest
		}
		if r.Routes != nil && len(r.Routes) == 0 {
			errs = append(errs, fmt.Errorf("policy %q: routes is empty; leave it out for [\"/ping\"]", r.Name))
		}
		p := Policy{Name: r.Name, Limit: r.Limit, Algorithm: r.Algorithm, Shadow: r.Shadow}
		if p.Name != PingPolicyName {
			p.Namespace = p.Name
		}
		w, err := parseSpan(r.Window)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("policy %q: window: %v", r.Name, err))
		case w < time.Second || w > MaxWindow || w%time.Second != 0:
			errs = append(errs, fmt.Errorf("policy %q: window %q is not whole seconds from 1s to 30d", r.Name, r.Window))
		default:
			p.Window = w
		}
		if p.Window == 0 {
			p.Window = time.Second // reported above; check the rest
		}
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[r.Name] {
			errs = append(errs, fmt.Errorf("policy %q is named twice", r.Name))
		}
		seen[r.Name] = true
		ks := defaultKey
		if r.Key != "" {
			if ks, err = ParseKeySource(r.Key); err != nil {
				errs = append(errs, fmt.Errorf("policy %q: key: %v", r.Name, err))
			}
		}
		routes := r.Routes
		if len(routes) == 0 {
			routes = RateLimitedRoutes
		}
		for _, route := range routes {
			if !slices.Contains(RateLimitedRoutes, route) {
				errs = append(errs, fmt.Errorf("policy %q: route %q is not one of %v", r.Name, route, RateLimitedRoutes))
			}
		}
		rules[i] = Rule{Policy: p, KeySource: ks, Routes: routes}
	}
	return rules, errors.Join(errs...)
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
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown member " + f + "; members are name, limit, window, algorithm, key, routes, shadow"
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

// KeySource says how a request's client key is found.
type KeySource struct {
	// Kind is KeyFromHeader, KeyFromSourceIP or KeyFromClaim.
	Kind string
	// Claim names the JWT claim when Kind is KeyFromClaim.
	Claim string
}

// Kinds of KeySource.
const (
	KeyFromHeader   = "header"
	KeyFromSourceIP = "source-ip"
	KeyFromClaim    = "claim"
)

func (k KeySource) String() string {
	if k.Kind == KeyFromClaim {
		return KeyFromClaim + ":" + k.Claim
	}
	return k.Kind
}

// ParseKeySource reads "header", "source-ip" or "claim:NAME".
func ParseKeySource(s string) (KeySource, error) {
	switch {
	case s == KeyFromHeader || s == KeyFromSourceIP:
		return KeySource{Kind: s}, nil
	case strings.HasPrefix(s, KeyFromClaim+":") && len(s) > len(KeyFromClaim)+1:
		return KeySource{Kind: KeyFromClaim, Claim: s[len(KeyFromClaim)+1:]}, nil
	}
	return KeySource{}, fmt.Errorf("%q is not header, source-ip or claim:NAME", s)
}

// FailMode is what /ping does when the store cannot decide.
type FailMode string

// Fail modes: closed rejects with 503, open lets the request through.
const (
	FailClosed FailMode = "closed"
	FailOpen   FailMode = "open"
)

// ConfigFromEnv reads the Lambda functions' configuration. DB_PATH is
// required. Every problem is reported in one error, one line each.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	return configFromEnv(getenv, false)
}

// LocalConfigFromEnv reads the local server's configuration: as
// ConfigFromEnv, but DB_PATH defaults to DefaultLocalDBPath, JOURNAL_MODE
// may be WAL, and ADDR and PRUNE_INTERVAL are read too.
func LocalConfigFromEnv(getenv func(string) string) (Config, error) {
	return configFromEnv(getenv, true)
}

func configFromEnv(getenv func(string) string, local bool) (Config, error) {
	c := Config{
		Limit:     DefaultLimit,
		Window:    DefaultWindow,
		KeySource: KeySource{Kind: KeyFromHeader},
		FailMode:  FailClosed,
		Store: StoreConfig{
			Kind:        StoreSQLite,
			Path:        getenv("DB_PATH"),
			JournalMode: DefaultJournalMode,
			BusyTimeout: DefaultBusyTimeout,
		},
	}
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
	}

	if v := getenv("STORE"); v != "" {
		switch v {
		case StoreSQLite, StoreDynamoDB:
			c.Store.Kind = v
		default:
			bad("STORE", "%q is not sqlite or dynamodb", v)
		}
	}
	switch {
	case c.Store.Kind == StoreDynamoDB:
		c.Store.Table, c.Store.Endpoint = getenv("TABLE_NAME"), getenv("DYNAMODB_ENDPOINT")
		if c.Store.Table == "" {
			bad("TABLE_NAME", "not set; STORE=dynamodb needs the table's name")
		}
		if e := c.Store.Endpoint; e != "" && !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") {
			bad("DYNAMODB_ENDPOINT", "%q is not an http:// or https:// URL", e)
		}
	case c.Store.Path == "" && local:
		c.Store.Path = DefaultLocalDBPath
	case c.Store.Path == "":
		bad("DB_PATH", "not set; it names the SQLite database file, e.g. /mnt/efs/ratelimit.db")
	}
	if v := getenv("RATE_LIMIT"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			bad("RATE_LIMIT", "%q is not a whole number of at least 1", v)
		}
		c.Limit = n
	}
	if v := getenv("WINDOW_SECONDS"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > int64(MaxWindow/time.Second) {
			bad("WINDOW_SECONDS", "%q is not a whole number of seconds from 1 to %d", v, int64(MaxWindow/time.Second))
		}
		c.Window = time.Duration(n) * time.Second
	}
	if v := getenv("CLIENT_KEY_SOURCE"); v != "" {
		ks, err := ParseKeySource(v)
		if err != nil {
			bad("CLIENT_KEY_SOURCE", "%v", err)
		}
		c.KeySource = ks
	}
	if v := getenv("FAIL_MODE"); v != "" {
		switch FailMode(v) {
		case FailClosed, FailOpen:
			c.FailMode = FailMode(v)
		default:
			bad("FAIL_MODE", "%q is not closed or open", v)
		}
	}
	if v := getenv("AUDIT_RETENTION"); v != "" {
		d, err := parseRetention(v)
		if err != nil {
			bad("AUDIT_RETENTION", "%v", err)
		}
		c.AuditRetention = d
	}
	if v := getenv("REJECT_CACHE"); v != "" {
		switch strings.ToLower(v) {
		case "on", "true", "1":
			c.RejectCache = true
		case "off", "false", "0":
		default:
			bad("REJECT_CACHE", "%q is not on or off", v)
		}
	}
	if v := getenv("BUSY_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Millisecond || d > MaxBusyTimeout {
			bad("BUSY_TIMEOUT", "%q is not a duration from 1ms to %v, e.g. 3s", v, MaxBusyTimeout)
		}
		c.Store.BusyTimeout = d
	}
	if v := getenv("JOURNAL_MODE"); v != "" {
		m := strings.ToUpper(v)
		switch {
		case m == "DELETE" || m == "TRUNCATE" || m == "PERSIST":
			c.Store.JournalMode = m
		case m == "WAL" && local:
			c.Store.JournalMode = m
		case m == "WAL":
			bad("JOURNAL_MODE", "WAL is unsafe on EFS (its index is shared memory on one host); only the local server accepts it")
		default:
			bad("JOURNAL_MODE", "%q is not DELETE, TRUNCATE or PERSIST", v)
		}
	}
	c.Store.AuditRetention = c.AuditRetention
	c.Rules = []Rule{{Policy: c.PingPolicy(), KeySource: c.KeySource, Routes: RateLimitedRoutes}}
	if v := getenv("POLICIES"); v != "" {
		rules, err := parseRules(v, c.KeySource)
		if err != nil {
			errs = append(errs, fmt.Errorf("POLICIES:\n%w", err))
		}
		c.Rules = rules
	}
	if v := getenv("SHADOW"); v != "" {
		switch strings.ToLower(v) {
		case "on", "true", "1":
			for i := range c.Rules {
				c.Rules[i].Policy.Shadow = true
			}
		case "off", "false", "0":
		default:
			bad("SHADOW", "%q is not on or off", v)
		}
	}
	c.Metrics = !local
	if v := getenv("METRICS"); v != "" {
		switch strings.ToLower(v) {
		case "emf":
			c.Metrics = true
		case "off":
			c.Metrics = false
		default:
			bad("METRICS", "%q is not emf or off", v)
		}
	}
	if v := getenv("METRICS_NAMESPACE"); v != "" {
		// CloudWatch refuses these, and would drop every metric line.
		if len(v) > 255 || strings.HasPrefix(v, "AWS/") || strings.ContainsFunc(v, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("./-_#: ", r))
		}) {
			bad("METRICS_NAMESPACE", "%q is not a CloudWatch namespace: up to 255 letters, digits and . - _ / # : or space, not starting AWS/", v)
		}
		c.MetricsNamespace = v
	}
	if local {
		c.Addr, c.PruneInterval = DefaultAddr, DefaultPruneInterval
		if v := getenv("ADDR"); v != "" {
			if _, _, err := net.SplitHostPort(v); err != nil {
				bad("ADDR", "%q is not host:port, e.g. 127.0.0.1:3000", v)
			}
			c.Addr = v
		}
		if v := getenv("PRUNE_INTERVAL"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Second {
				bad("PRUNE_INTERVAL", "%q is not a duration of at least 1s, e.g. 1m", v)
			}
			c.PruneInterval = d
		}
	}
	if len(errs) > 0 {
		return Config{}, &ConfigError{Problems: errs}
	}
	return c, nil
}

// parseRetention reads a retention as a Go duration ("720h") or whole days
// ("30d"); "0" and "" mean keep forever.
func parseRetention(v string) (time.Duration, error) {
	if v == "0" {
		return 0, nil
	}
	d, err := parseSpan(v)
	if err == nil && d < time.Second {
		err = fmt.Errorf("%q is shorter than 1s", v)
	}
	return d, err
}

// ConfigError lists every problem found in the configuration.
type ConfigError struct {
	Problems []error
}

func (e *ConfigError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		// A problem of several lines (POLICIES) is indented under its name.
		lines[i] = "  " + strings.ReplaceAll(p.Error(), "\n", "\n    ")
	}
	return "invalid configuration:\n" + strings.Join(lines, "\n")
}

// Unwrap lets errors.Is and errors.As see each problem.
func (e *ConfigError) Unwrap() []error { return e.Problems }

var _ error = (*ConfigError)(nil)
