package envconfig

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/stores"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// Read reads the configuration from the environment, through getenv
// (os.Getenv in main), as host reads it. DB_PATH is required with the
// SQLite store on Lambda, TABLE_NAME with DynamoDB. Every problem is
// reported in one *ConfigError, one line each, named by its variable:
// what the store would refuse at Open (stores.Validate: a DB_PATH that is
// a directory, a shard count out of range), and route patterns that
// http.ServeMux would refuse, as well as what is wrong with each variable.
func Read(getenv func(string) string, host Host) (Config, error) {
	e := &env{getenv: getenv, host: host}
	c := Config{
		FailMode:         e.failMode(),
		RejectCache:      e.onOff("REJECT_CACHE"),
		Metrics:          e.metrics(),
		MetricsNamespace: e.metricsNamespace(),
	}
	var known bool
	c.Store, known = e.store()
	var policies error
	c.Rules, policies = e.rules()
	if known {
		for _, err := range stores.Validate(c.Store) {
			e.storeProblem(err)
		}
	}
	// A route pattern ServeMux refuses is a problem of POLICIES, listed
	// with its others.
	if err := errors.Join(append([]error{policies}, service.RouteErrors(c.Rules)...)...); err != nil {
		e.problems = append(e.problems, fmt.Errorf("POLICIES:\n%w", err))
	}
	if len(e.problems) > 0 {
		return Config{}, &ConfigError{Problems: e.problems}
	}
	return c, nil
}

// variables names the environment variable of each store setting.
var variables = map[string]string{
	"Path": "DB_PATH", "Shards": "SQLITE_SHARDS", "JournalMode": "JOURNAL_MODE", "BusyTimeout": "BUSY_TIMEOUT",
	"Table": "TABLE_NAME", "Endpoint": "DYNAMODB_ENDPOINT", "AuditRetention": "AUDIT_RETENTION",
}

// storeProblem lists what the store refused, under its variable.
func (e *env) storeProblem(err error) {
	if fe := (*stores.FieldError)(nil); errors.As(err, &fe) && variables[fe.Field] != "" {
		e.bad(variables[fe.Field], "%s", fe.Problem)
		return
	}
	e.bad("STORE", "%v", err)
}

// env reads variables and collects what is wrong with them.
type env struct {
	getenv   func(string) string
	host     Host
	problems []error
}

func (e *env) bad(name, format string, args ...any) {
	e.problems = append(e.problems, fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...)))
}

// onOff reads a switch (see ParseSwitch).
func (e *env) onOff(name string) bool {
	on, err := ParseSwitch(e.getenv(name))
	if err != nil {
		e.bad(name, "%v", err)
	}
	return on
}

// ParseSwitch reads an on/off setting, as every switch of the environment
// is read: on, true or 1; off, false, 0 or empty; in any case.
func ParseSwitch(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "on", "true", "1":
		return true, nil
	case "", "off", "false", "0":
		return false, nil
	}
	return false, fmt.Errorf("%q is not on or off (true or false, 1 or 0)", v)
}

func (e *env) failMode() limiter.FailMode {
	m := limiter.FailMode(strings.ToLower(e.getenv("FAIL_MODE")))
	if err := m.Validate(); err != nil {
		e.bad("FAIL_MODE", "%q is not closed or open", e.getenv("FAIL_MODE"))
		return limiter.FailClosed
	}
	if m == "" {
		return limiter.FailClosed
	}
	return m
}

// store reads STORE and the variables of the store it names. What the
// store itself refuses (a path, a shard count, a table name) is its own to
// say (stores.Validate, in Read), when STORE names one: known is false
// when it does not.
func (e *env) store() (cfg stores.Config, known bool) {
	s := stores.Config{
		Kind:           stores.SQLite,
		BusyTimeout:    e.busyTimeout(),
		AuditRetention: e.retention(),
	}
	switch v := stores.Kind(e.getenv("STORE")); v {
	case "", stores.SQLite:
		if s.Path = e.getenv("DB_PATH"); s.Path == "" && e.host == Local {
			s.Path = DefaultLocalPath
		} else if s.Path != "" && strings.TrimSpace(s.Path) == "" {
			// A file named " " in the working directory: never meant.
			e.bad("DB_PATH", "%q is spaces alone, not a path", s.Path)
		}
		// JOURNAL_MODE and SQLITE_SHARDS are SQLite's: with another
		// store they are not read.
		s.JournalMode = e.journalMode()
		s.Shards = int(e.int("SQLITE_SHARDS", 1, 1, sqlite.MaxShards, fmt.Sprintf("a whole number of files from 1 to %d", sqlite.MaxShards)))
	case stores.DynamoDB:
		s.Kind, s.Table, s.Endpoint = v, e.getenv("TABLE_NAME"), e.getenv("DYNAMODB_ENDPOINT")
	case stores.Memory:
		s.Kind = v
		if e.host != Local {
			// Each execution environment would count alone: N of them
			// would let N times the limit through.
			e.bad("STORE", "memory counts in one process, and every Lambda execution environment is a process of its own: use sqlite or dynamodb (only the local server takes memory)")
		}
	default:
		// Not checked further: its settings are no store's.
		e.bad("STORE", "%q is not sqlite, dynamodb or memory", v)
		return s, false
	}
	return s, true
}

// journalMode reads JOURNAL_MODE: one the store knows (stores.Validate
// says which), but WAL only on one machine: its index is shared memory
// on one host, and every Lambda execution environment is a host of its
// own.
func (e *env) journalMode() string {
	v := e.getenv("JOURNAL_MODE")
	m := strings.ToUpper(v)
	switch {
	case m == "WAL" && e.host != Local:
		e.bad("JOURNAL_MODE", "WAL is unsafe on EFS (its index is shared memory on one host); only the local server accepts it")
		return sqlite.DefaultJournalMode
	case m == "":
		return sqlite.DefaultJournalMode
	case m != "DELETE" && m != "TRUNCATE" && m != "PERSIST" && m != "WAL":
		// Said here, as written and with what this host takes: the
		// store's own check names the value upper-cased, and offers WAL
		// to the functions, which refuse it.
		modes := "DELETE, TRUNCATE or PERSIST"
		if e.host == Local {
			modes = "DELETE, TRUNCATE, PERSIST or WAL"
		}
		e.bad("JOURNAL_MODE", "%q is not %s", v, modes)
		return sqlite.DefaultJournalMode
	}
	return m
}

func (e *env) busyTimeout() time.Duration {
	v := e.getenv("BUSY_TIMEOUT")
	if v == "" {
		return sqlite.DefaultBusyTimeout // dynamodb's too
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Millisecond || d > MaxBusyTimeout {
		e.bad("BUSY_TIMEOUT", "%q is not a duration from 1ms to %v, e.g. 3s", v, MaxBusyTimeout)
		return 0
	}
	return d
}

// retention reads AUDIT_RETENTION as a Go duration ("720h") or whole days
// ("30d"); "0" and "" mean keep forever.
func (e *env) retention() time.Duration {
	v := e.getenv("AUDIT_RETENTION")
	if v == "" || v == "0" {
		return 0
	}
	d, err := parseSpan(v)
	if err == nil && d < time.Second {
		err = fmt.Errorf("%q is shorter than a retention may be: at least 1s; 0 keeps audit rows forever", v)
	}
	if err != nil {
		e.bad("AUDIT_RETENTION", "%v", err)
		return 0
	}
	return d
}

// rules reads the policies: POLICIES, or the seed's one policy from
// RATE_LIMIT, WINDOW_SECONDS and CLIENT_KEY_SOURCE, which is also every
// policy's default key source; SHADOW=on makes every one a shadow.
func (e *env) rules() ([]limiter.Rule, error) {
	ks := limiter.KeySource{Kind: limiter.KeyFromHeader}
	if v := e.getenv("CLIENT_KEY_SOURCE"); v != "" {
		var err error
		if ks, err = ParseKeySource(v); err != nil {
			e.bad("CLIENT_KEY_SOURCE", "%v", err)
		}
	}
	var rules []limiter.Rule
	var policies error
	if v := e.getenv("POLICIES"); v != "" {
		// RATE_LIMIT and WINDOW_SECONDS are not read: POLICIES replaces
		// them, whatever they hold.
		var err error
		if rules, err = ParseRules(v, ks); err != nil {
			policies = err
		}
	} else {
		seed := limiter.Policy{Name: DefaultPolicyName,
			Limit: e.int("RATE_LIMIT", DefaultLimit, 1, limiter.MaxLimit, fmt.Sprintf("a whole number from 1 to %d", int64(limiter.MaxLimit))),
			Window: time.Second * time.Duration(e.int("WINDOW_SECONDS", int64(DefaultWindow/time.Second), 1, int64(limiter.MaxWindow/time.Second),
				fmt.Sprintf("a whole number of seconds from 1 to %d", int64(limiter.MaxWindow/time.Second))))}
		rules = []limiter.Rule{{Policy: seed, KeySource: ks, Routes: []string{DefaultRoute}}}
	}
	if e.onOff("SHADOW") {
		for i := range rules {
			rules[i].Policy.Shadow = true
		}
	}
	return rules, policies
}

// int reads a whole number from lo to hi, what describing the range.
func (e *env) int(name string, def, lo, hi int64, what string) int64 {
	v := e.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		e.bad(name, "%q is not %s", v, what)
		return def
	}
	return n
}

func (e *env) metrics() bool {
	v := strings.ToLower(e.getenv("METRICS"))
	if v == "" && e.host == Local {
		v = "off"
	}
	switch v {
	case "", "emf":
		return true
	case "off":
	default:
		e.bad("METRICS", "%q is not emf or off", e.getenv("METRICS"))
	}
	return false
}

func (e *env) metricsNamespace() string {
	v := e.getenv("METRICS_NAMESPACE")
	// CloudWatch refuses these, and would drop every metric line.
	if len(v) > 255 || strings.HasPrefix(v, "AWS/") || strings.HasPrefix(v, ":") || v != "" && strings.TrimSpace(v) == "" || strings.ContainsFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("./-_#: ", r))
	}) {
		e.bad("METRICS_NAMESPACE", "%q is not a CloudWatch namespace: up to 255 letters, digits and . - _ / # : or space, not only spaces, not starting AWS/ or a colon", v)
	}
	return v
}
