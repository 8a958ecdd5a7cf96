package limiter

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ConfigFromEnv reads the configuration every host shares from the
// environment, through getenv (os.Getenv in main). DB_PATH is required with
// the SQLite store, TABLE_NAME with DynamoDB. Every problem is reported in
// one *ConfigError, one line each, named by its variable. A host that
// knows more than the domain does (the HTTP layer, which checks route
// patterns) adds its own checks, run on what was read, whose problems are
// listed with the others.
func ConfigFromEnv(getenv func(string) string, checks ...func(Config) []error) (Config, error) {
	e := &env{getenv: getenv}
	c := Config{
		FailMode:         e.failMode(),
		RejectCache:      e.onOff("REJECT_CACHE"),
		Store:            e.store(),
		Metrics:          e.metrics(),
		MetricsNamespace: e.metricsNamespace(),
	}
	c.Rules = e.rules()
	for _, check := range checks {
		e.problems = append(e.problems, check(c)...)
	}
	if len(e.problems) > 0 {
		return Config{}, &ConfigError{Problems: e.problems}
	}
	return c, nil
}

// env reads variables and collects what is wrong with them.
type env struct {
	getenv   func(string) string
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

func (e *env) failMode() FailMode {
	m := FailMode(strings.ToLower(e.getenv("FAIL_MODE")))
	if err := m.Validate(); err != nil {
		e.bad("FAIL_MODE", "%q is not closed or open", e.getenv("FAIL_MODE"))
		return FailClosed
	}
	if m == "" {
		return FailClosed
	}
	return m
}

// store reads STORE and the variables of the store it names.
func (e *env) store() StoreConfig {
	s := StoreConfig{
		Kind:           StoreSQLite,
		BusyTimeout:    e.busyTimeout(),
		AuditRetention: e.retention(),
	}
	switch v := StoreKind(e.getenv("STORE")); v {
	case "", StoreSQLite:
		if s.Path = e.getenv("DB_PATH"); s.Path == "" {
			e.bad("DB_PATH", "not set; it names the SQLite database file, e.g. /mnt/efs/ratelimit.db")
		}
		// JOURNAL_MODE and SQLITE_SHARDS are SQLite's: with another
		// store they are not read.
		s.JournalMode = e.journalMode()
		s.Shards = int(e.int("SQLITE_SHARDS", 1, 1, MaxShards, fmt.Sprintf("a whole number of files from 1 to %d", MaxShards)))
	case StoreDynamoDB:
		s.Kind, s.Table, s.Endpoint = v, e.getenv("TABLE_NAME"), e.getenv("DYNAMODB_ENDPOINT")
		if s.Table == "" {
			e.bad("TABLE_NAME", "not set; STORE=dynamodb needs the table's name")
		}
		if u := s.Endpoint; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			e.bad("DYNAMODB_ENDPOINT", "%q is not an http:// or https:// URL", u)
		}
	default:
		e.bad("STORE", "%q is not sqlite or dynamodb", v)
	}
	return s
}

func (e *env) journalMode() string {
	switch m := strings.ToUpper(e.getenv("JOURNAL_MODE")); m {
	case "":
	case "DELETE", "TRUNCATE", "PERSIST":
		return m
	case "WAL":
		e.bad("JOURNAL_MODE", "WAL is unsafe on EFS (its index is shared memory on one host); only the local server accepts it")
	default:
		e.bad("JOURNAL_MODE", "%q is not DELETE, TRUNCATE or PERSIST (nor WAL, which only the local server takes)", e.getenv("JOURNAL_MODE"))
	}
	return DefaultJournalMode
}

func (e *env) busyTimeout() time.Duration {
	v := e.getenv("BUSY_TIMEOUT")
	if v == "" {
		return DefaultBusyTimeout
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < time.Millisecond || d > MaxBusyTimeout {
		e.bad("BUSY_TIMEOUT", "%q is not a duration from 1ms to %v, e.g. 3s", v, MaxBusyTimeout)
		return DefaultBusyTimeout
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
		err = fmt.Errorf("%q is neither 0 (keep forever) nor at least 1s", v)
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
func (e *env) rules() []Rule {
	ks := KeySource{Kind: KeyFromHeader}
	if v := e.getenv("CLIENT_KEY_SOURCE"); v != "" {
		var err error
		if ks, err = ParseKeySource(v); err != nil {
			e.bad("CLIENT_KEY_SOURCE", "%v", err)
		}
	}
	var rules []Rule
	if v := e.getenv("POLICIES"); v != "" {
		// RATE_LIMIT and WINDOW_SECONDS are not read: POLICIES replaces
		// them, whatever they hold.
		var err error
		if rules, err = ParseRules(v, ks); err != nil {
			e.problems = append(e.problems, fmt.Errorf("POLICIES:\n%w", err))
		}
	} else {
		seed := Policy{Name: DefaultPolicyName,
			Limit: e.int("RATE_LIMIT", DefaultLimit, 1, MaxLimit, fmt.Sprintf("a whole number from 1 to %d", int64(MaxLimit))),
			Window: time.Second * time.Duration(e.int("WINDOW_SECONDS", int64(DefaultWindow/time.Second), 1, int64(MaxWindow/time.Second),
				fmt.Sprintf("a whole number of seconds from 1 to %d", int64(MaxWindow/time.Second))))}
		rules = []Rule{{Policy: seed, KeySource: ks, Routes: []string{DefaultRoute}}}
	}
	if e.onOff("SHADOW") {
		for i := range rules {
			rules[i].Policy.Shadow = true
		}
	}
	return rules
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
	switch v := strings.ToLower(e.getenv("METRICS")); v {
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
	if len(v) > 255 || strings.HasPrefix(v, "AWS/") || strings.ContainsFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("./-_#: ", r))
	}) {
		e.bad("METRICS_NAMESPACE", "%q is not a CloudWatch namespace: up to 255 letters, digits and . - _ / # : or space, not starting AWS/", v)
	}
	return v
}
