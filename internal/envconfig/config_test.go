package envconfig_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/stores"
	"github.com/ft251/ratelimit/limiter"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestConfigDefaults(t *testing.T) {
	c, err := envconfig.Read(env(map[string]string{"DB_PATH": "/mnt/efs/ratelimit.db"}), envconfig.Lambda)
	if err != nil {
		t.Fatal(err)
	}
	want := envconfig.Config{
		FailMode: limiter.FailClosed,
		Store:    stores.Config{Kind: "sqlite", Path: "/mnt/efs/ratelimit.db", Shards: 1, JournalMode: "DELETE", BusyTimeout: 3 * time.Second},
		Rules: []limiter.Rule{{
			Policy:    limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute},
			KeySource: limiter.KeySource{Kind: "header"},
			Routes:    []string{"/ping"},
		}},
		Metrics: true,
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("defaults = %+v\nwant %+v", c, want)
	}
}

func TestConfigReadsEverySetting(t *testing.T) {
	c, err := readEnv(env(map[string]string{
		"DB_PATH": "/x.db", "RATE_LIMIT": "100", "WINDOW_SECONDS": "3600",
		"CLIENT_KEY_SOURCE": "claim:sub", "FAIL_MODE": "open", "AUDIT_RETENTION": "30d",
		"BUSY_TIMEOUT": "1500ms", "JOURNAL_MODE": "truncate", "SQLITE_SHARDS": "16",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Rules[0].Policy; p.Limit != 100 || p.Window != time.Hour || c.Rules[0].KeySource != (limiter.KeySource{Kind: "claim", Claim: "sub"}) ||
		c.FailMode != limiter.FailOpen || c.Store.AuditRetention != 30*24*time.Hour ||
		c.Store.BusyTimeout != 1500*time.Millisecond || c.Store.JournalMode != "TRUNCATE" || c.Store.Shards != 16 {
		t.Errorf("config = %+v", c)
	}
	if c, _ := envconfig.Read(env(map[string]string{"DB_PATH": "x", "AUDIT_RETENTION": "720h", "CLIENT_KEY_SOURCE": "source-ip"}), envconfig.Lambda); c.Store.AuditRetention != 720*time.Hour || c.Rules[0].KeySource.Kind != "source-ip" {
		t.Errorf("config = %+v", c)
	}
}

func TestConfigReportsEveryProblemAtOnce(t *testing.T) {
	_, err := readEnv(env(map[string]string{
		"RATE_LIMIT": "0", "WINDOW_SECONDS": "1.5", "CLIENT_KEY_SOURCE": "x-forwarded-for",
		"FAIL_MODE": "maybe", "AUDIT_RETENTION": "forever", "BUSY_TIMEOUT": "1h", "JOURNAL_MODE": "WAL",
		"SQLITE_SHARDS": "65",
	}))
	var ce *envconfig.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a ConfigError", err)
	}
	msg := err.Error()
	for _, name := range []string{"DB_PATH", "RATE_LIMIT", "WINDOW_SECONDS", "CLIENT_KEY_SOURCE", "FAIL_MODE", "AUDIT_RETENTION", "BUSY_TIMEOUT", "JOURNAL_MODE", "SQLITE_SHARDS"} {
		if !strings.Contains(msg, name+":") {
			t.Errorf("error does not mention %s:\n%s", name, msg)
		}
	}
	if len(ce.Problems) != 9 {
		t.Errorf("%d problems, want 9:\n%s", len(ce.Problems), msg)
	}
	if !strings.Contains(msg, "WAL is unsafe on EFS") {
		t.Errorf("WAL rejection does not say why:\n%s", msg)
	}
}

func TestConfigRejectCache(t *testing.T) {
	for v, want := range map[string]bool{"": false, "off": false, "on": true, "true": true, "0": false} {
		c, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", "REJECT_CACHE": v}), envconfig.Lambda)
		if err != nil || c.RejectCache != want {
			t.Errorf("REJECT_CACHE=%q: %v %v, want %v", v, c.RejectCache, err, want)
		}
	}
	if _, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", "REJECT_CACHE": "sometimes"}), envconfig.Lambda); err == nil {
		t.Error("REJECT_CACHE=sometimes accepted")
	}
}

func TestConfigDynamoDB(t *testing.T) {
	c, err := envconfig.Read(env(map[string]string{"STORE": "dynamodb", "TABLE_NAME": "counters", "DYNAMODB_ENDPOINT": "http://127.0.0.1:5000", "AUDIT_RETENTION": "7d"}), envconfig.Lambda)
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Kind != "dynamodb" || c.Store.Table != "counters" || c.Store.Endpoint != "http://127.0.0.1:5000" || c.Store.AuditRetention != 7*24*time.Hour {
		t.Errorf("store config = %+v", c.Store)
	}
	_, err = envconfig.Read(env(map[string]string{"STORE": "dynamodb", "DYNAMODB_ENDPOINT": "localhost:5000"}), envconfig.Lambda)
	for _, name := range []string{"TABLE_NAME:", "DYNAMODB_ENDPOINT:"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error does not name %s: %v", name, err)
		}
	}
	if err != nil && strings.Contains(err.Error(), "DB_PATH") {
		t.Errorf("DB_PATH demanded for the DynamoDB store: %v", err)
	}
	// A table name or an endpoint DynamoDB could never take is refused
	// here: it used to start the server, every request answered with the
	// fail mode (open: nothing limited).
	for name, v := range map[string]string{
		"TABLE_NAME": " ", "TABLE_NAME=a": "a", "TABLE_NAME=bad name": "bad name", "TABLE_NAME=256": strings.Repeat("x", 256),
		"DYNAMODB_ENDPOINT": "http://", "DYNAMODB_ENDPOINT=ftp": "ftp://h",
		"DYNAMODB_ENDPOINT=99999": "http://127.0.0.1:99999", "DYNAMODB_ENDPOINT=0": "http://127.0.0.1:0", "DYNAMODB_ENDPOINT=x": "http://h:x",
		"DYNAMODB_ENDPOINT=:": "http://h:",
	} {
		vars := map[string]string{"STORE": "dynamodb", "TABLE_NAME": "counters"}
		vars[strings.Split(name, "=")[0]] = v
		if _, err := envconfig.Read(env(vars), envconfig.Lambda); err == nil || !strings.Contains(err.Error(), strings.Split(name, "=")[0]+":") {
			t.Errorf("%s=%q: %v, want it refused", strings.Split(name, "=")[0], v, err)
		}
	}
	for _, endpoint := range []string{"http://127.0.0.1:8000", "https://dynamodb.eu-west-1.amazonaws.com", "http://[::1]:65535/"} {
		if _, err := envconfig.Read(env(map[string]string{"STORE": "dynamodb", "TABLE_NAME": "counters", "DYNAMODB_ENDPOINT": endpoint}), envconfig.Lambda); err != nil {
			t.Errorf("DYNAMODB_ENDPOINT=%s: %v", endpoint, err)
		}
	}
	for _, table := range []string{"a.b-c_1", strings.Repeat("x", 255), "arn:aws:dynamodb:eu-west-1:123456789012:table/counters"} {
		if _, err := envconfig.Read(env(map[string]string{"STORE": "dynamodb", "TABLE_NAME": table}), envconfig.Lambda); err != nil {
			t.Errorf("TABLE_NAME=%s: %v", table, err)
		}
	}
	// An unknown store is that one problem: DB_PATH, set here, used to be
	// reported as not set, since the store was then checked as SQLite's.
	if _, err := envconfig.Read(env(map[string]string{"STORE": "redis", "DB_PATH": "x"}), envconfig.Lambda); err == nil || !strings.Contains(err.Error(), "STORE:") || strings.Contains(err.Error(), "DB_PATH") {
		t.Errorf("STORE=redis: %v; want STORE refused and nothing about DB_PATH", err)
	}
	if _, err := envconfig.Read(env(map[string]string{"STORE": "redis"}), envconfig.Local); err == nil || strings.Contains(err.Error(), "DB_PATH") {
		t.Errorf("local server, STORE=redis: %v; want STORE refused and nothing about DB_PATH", err)
	}
}

func TestConfigPolicies(t *testing.T) {
	c, err := readEnv(env(map[string]string{
		"DB_PATH": "x", "CLIENT_KEY_SOURCE": "source-ip",
		"POLICIES": `[{"name":"ping","limit":3,"window":"60s"},
			{"name":"burst","limit":10,"window":"1s","algorithm":"sliding","shadow":true},
			{"name":"monthly","limit":100000,"window":"30d","key":"claim:sub","routes":["/ping"]}]`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []limiter.Rule{
		{Policy: limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}, KeySource: limiter.KeySource{Kind: "source-ip"}, Routes: []string{"/ping"}},
		{Policy: limiter.Policy{Name: "burst", Limit: 10, Window: time.Second, Namespace: "burst", Algorithm: "sliding", Shadow: true}, KeySource: limiter.KeySource{Kind: "source-ip"}, Routes: []string{"/ping"}},
		{Policy: limiter.Policy{Name: "monthly", Limit: 100000, Window: 30 * 24 * time.Hour, Namespace: "monthly"}, KeySource: limiter.KeySource{Kind: "claim", Claim: "sub"}, Routes: []string{"/ping"}},
	}
	if !reflect.DeepEqual(c.Rules, want) {
		t.Errorf("rules = %+v\nwant %+v", c.Rules, want)
	}
	c, _ = envconfig.Read(env(map[string]string{"DB_PATH": "x", "SHADOW": "on"}), envconfig.Lambda)
	if !c.Rules[0].Policy.Shadow {
		t.Errorf("SHADOW=on left the default policy enforcing")
	}
	_, err = readEnv(env(map[string]string{"DB_PATH": "x", "POLICIES": `[{"name":"a","limit":0,"window":"1s"},{"name":"a","limit":1,"window":"31d"},
		{"name":"Bad Name","limit":1,"window":"1s","algorithm":"leaky","key":"x-forwarded-for","routes":[" "]},{"name":"b","limit":1,"window":"soon"}]`}))
	for _, want := range []string{"limit 0 is not from 1 to 999999999999999", "named twice", `window "31d"`, "names are lower-case", "algorithm \"leaky\"", "key:", "a route is empty", `"soon" is not a duration`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("POLICIES error does not say %q: %v", want, err)
		}
	}
	if _, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", "POLICIES": `{"name":"ping"}`}), envconfig.Lambda); err == nil {
		t.Error("a POLICIES object, not an array, was accepted")
	}
}

func TestConfigMetrics(t *testing.T) {
	c, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", "METRICS_NAMESPACE": "RateLimit/prod-stack"}), envconfig.Lambda)
	if err != nil || !c.Metrics || c.MetricsNamespace != "RateLimit/prod-stack" {
		t.Errorf("functions: metrics %v in %q (%v), want EMF on by default in the given namespace", c.Metrics, c.MetricsNamespace, err)
	}
	if c, _ := envconfig.Read(env(map[string]string{"DB_PATH": "x", "METRICS": "off"}), envconfig.Lambda); c.Metrics {
		t.Error("METRICS=off left metrics on")
	}
	for _, bad := range []map[string]string{
		{"METRICS": "prometheus"},
		{"METRICS_NAMESPACE": "AWS/Lambda"},
		{"METRICS_NAMESPACE": "rate{limit}"},
		{"METRICS_NAMESPACE": strings.Repeat("n", 256)},
		// CloudWatch takes no namespace that starts with a colon, or that is
		// spaces alone: both passed, and every metric line was dropped.
		{"METRICS_NAMESPACE": ":ns"},
		{"METRICS_NAMESPACE": " "},
		{"SHADOW": "maybe"},
	} {
		bad["DB_PATH"] = "x"
		if _, err := envconfig.Read(env(bad), envconfig.Lambda); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestConfigPoliciesReadWholeNumbersAsTheAPIDoes: POLICIES takes a whole
// number in any form JSON writes one, as POST /check's cost and the admin
// routes' limit do: 100.0 and 1e2 used to be refused as "not number
// 100.0". A limit left out, or null, is required, where it was read as 0
// ("limit 0 is not from 1 to ..."), in a policy and in a tier.
func TestConfigPoliciesReadWholeNumbersAsTheAPIDoes(t *testing.T) {
	c, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", "POLICIES": `[{"name":"a","limit":1e2,"window":"1m","cost":2.0},` +
		`{"name":"g","limit":100.0,"window":"1m","algorithm":"gcra","burst":1.00e1,"tiers":{"pro":{"limit":2E2,"burst":20.000}},"tier":{"source":"header","header":"X-Plan"}}]`}), envconfig.Lambda)
	if err != nil {
		t.Fatal(err)
	}
	a, g := c.Rules[0], c.Rules[1]
	if a.Policy.Limit != 100 || a.Cost != 2 || g.Policy.Limit != 100 || g.Policy.Burst != 10 || g.Policy.Tiers["pro"] != (limiter.Tier{Limit: 200, Burst: 20}) {
		t.Errorf("read %+v and %+v", a, g)
	}
	for v, want := range map[string]string{
		`[{"name":"a","window":"1m"}]`:              `policy "a": limit is required`,
		`[{"name":"a","limit":null,"window":"1m"}]`: `policy "a": limit is required`,
		`[{"name":"a","limit":10,"window":"1m","tiers":{"pro":{"limit":null}},"tier":{"source":"header","header":"X"}}]`: `policy "a" tier "pro": limit is required`,
		`[{"name":"a","limit":1.5,"window":"1m"}]`:                                                                      `policy 1: "limit" must be a whole number, not number 1.5`,
		`[{"name":"a","limit":1e30,"window":"1m"}]`:                                                                     `policy 1: "limit" is 1e30, more than any limit can be`,
		`[{"name":"a","limit":1,"window":"1m","cost":-1e30}]`:                                                           `policy 1: "cost" is -1e30, less than any cost can be`,
		`[{"name":"a","limit":1,"window":"1m","tiers":{"pro":{"limit":1e30}},"tier":{"source":"header","header":"X"}}]`: `"limit" is 1e30, more than any limit can be`,
		`[{"name":"a","limit":1,"window":"1m","cost":"2"}]`:                                                             `policy 1: "cost" must be a whole number, not string`,
	} {
		_, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", "POLICIES": v}), envconfig.Lambda)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "limit 0") {
			t.Errorf("POLICIES=%s: %v; want %q", v, err, want)
		}
	}
}

// POLICIES problems are told in the terms of the JSON a person wrote, every
// one of them at once.
func TestConfigPoliciesProblemsInTheirTerms(t *testing.T) {
	for v, want := range map[string][]string{
		`[{"name":"a","limit":1,"window":"1s"}] junk`: {"invalid JSON at byte 40"},
		`{"name":"ping"}`: {"found object; POLICIES is a JSON array"},
		`[{"name":"a","limit":"3","window":"1s"},{"name":"b","limit":3},{"name":"c","limit":1,"window":"1s","routes":[]},` +
			`{"name":"d","limit":1,"window":"1s","burst":2},[1],{"name":"e","limit":1.5,"window":"1s"},{"name":"f","limit":1,"window":"1s","bucket":2}]`: {
			`policy 1: "limit" must be a whole number, not string`,
			`policy "b": window is required`,
			`policy "c": routes is empty`,
			`policy "d": burst applies to the gcra algorithm only`,
			`policy 5: found array where a policy object belongs`,
			`policy 6: "limit" must be a whole number, not number 1.5`,
			`policy 7: unknown member "bucket"`,
		},
	} {
		_, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", "POLICIES": v}), envconfig.Lambda)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("POLICIES=%s: error does not say %q: %v", v, w, err)
			}
		}
		if err != nil && (strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "ruleJSON")) {
			t.Errorf("POLICIES=%s: error speaks of Go types: %v", v, err)
		}
	}
}

// TestConfigGCRAAndCosts: POLICIES names the GCRA algorithm with its burst,
// and what a request under a policy costs; both are checked.
func TestConfigGCRAAndCosts(t *testing.T) {
	c, err := readEnv(env(map[string]string{"DB_PATH": "x", "POLICIES": `[
		{"name":"tokens","limit":100,"window":"1m","algorithm":"gcra","burst":20,"routes":["GET /orders/{id}"]},
		{"name":"uploads","limit":100,"window":"1h","routes":["POST /upload"],"cost":5}]`}))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Rules[0]; r.Policy.Algorithm != limiter.GCRA || r.Policy.Burst != 20 || r.Policy.Capacity() != 20 || r.Routes[0] != "GET /orders/{id}" {
		t.Errorf("gcra rule = %+v", r)
	}
	if r := c.Rules[1]; r.Cost != 5 || r.Policy.Algorithm.String() != "fixed" {
		t.Errorf("cost rule = %+v", r)
	}
	_, err = readEnv(env(map[string]string{"DB_PATH": "x", "POLICIES": `[
		{"name":"a","limit":10,"window":"1m","cost":0},{"name":"b","limit":10,"window":"1m","cost":11},
		{"name":"c","limit":10,"window":"1m","algorithm":"gcra","burst":0},{"name":"d","limit":10,"window":"1m","burst":3}]`}))
	for _, want := range []string{`policy "a": cost 0`, `policy "b": cost 11`, `policy "c": burst 0 is below 1`, `policy "d": burst applies to the gcra algorithm only`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
}

// readEnv reads the configuration as the Lambda functions do.
func readEnv(getenv func(string) string) (envconfig.Config, error) {
	return envconfig.Read(getenv, envconfig.Lambda)
}

// TestMemoryIsForTheLocalServerOnly: STORE=memory counts in one process;
// the local server takes it, the functions refuse it and say why, since N
// execution environments would each let the whole limit through.
func TestMemoryIsForTheLocalServerOnly(t *testing.T) {
	c, err := envconfig.Read(env(map[string]string{"STORE": "memory"}), envconfig.Local)
	if err != nil || c.Store.Kind != stores.Memory {
		t.Errorf("local server, STORE=memory: %+v, %v; want the memory store", c.Store, err)
	}
	_, err = envconfig.Read(env(map[string]string{"STORE": "memory"}), envconfig.Lambda)
	if err == nil || !strings.Contains(err.Error(), "STORE: memory counts in one process") || strings.Contains(err.Error(), "DB_PATH") {
		t.Errorf("functions, STORE=memory: %v; want STORE refused, saying why, and nothing about DB_PATH", err)
	}
}

// TestConfigSpansSayWhatIsWrong: a span written in days is read as the
// same span written in hours is (the same range, the same messages), and
// a refusal says what the value lacks: a number, or a range, in the terms
// of the setting. SQLITE_SHARDS refuses 0 as it refuses 65 (the docs say 1
// to 64).
func TestConfigSpansSayWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		name, value string
		want        string // in the error; "" means accepted
	}{
		{"AUDIT_RETENTION", "36501d", ""},
		{"AUDIT_RETENTION", "876024h", ""},
		{"AUDIT_RETENTION", "0d", "at least 1s; 0 keeps audit rows forever"},
		{"AUDIT_RETENTION", "0s", "at least 1s; 0 keeps audit rows forever"},
		{"AUDIT_RETENTION", "-1d", "at least 1s; 0 keeps audit rows forever"},
		{"AUDIT_RETENTION", "1.5d", `"1.5d" is not a whole number of days`},
		{"AUDIT_RETENTION", "200000d", `"200000d" is longer than the longest span, about 292 years`},
		{"AUDIT_RETENTION", "99999999999999999999d", `is longer than the longest span`},
		{"POLICIES", `[{"name":"a","limit":1,"window":"-1d"}]`, `window "-1d": must be whole seconds from 1s to 30d`},
		{"POLICIES", `[{"name":"a","limit":1,"window":"0d"}]`, `window "0d": must be whole seconds from 1s to 30d`},
		{"POLICIES", `[{"name":"a","limit":1,"window":"36501d"}]`, `window "36501d": must be whole seconds from 1s to 30d`},
		{"SQLITE_SHARDS", "0", `"0" is not a whole number of files from 1 to 64`},
		{"SQLITE_SHARDS", "65", `"65" is not a whole number of files from 1 to 64`},
		{"SQLITE_SHARDS", "64", ""},
	} {
		_, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", c.name: c.value}), envconfig.Lambda)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s=%s: refused: %v", c.name, c.value, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s=%s: error does not say %q: %v", c.name, c.value, c.want, err)
		}
	}
}

// TestConfigRefusesAHeadRoute: this service answers a HEAD as its GET,
// headers and status alike, so a POLICIES route for HEAD alone would count
// the HEADs and not the GETs they stand for (a HEAD /ping got its 429
// while GET /ping went uncounted, and -check said nothing counted it).
// Refused, naming the GET route that counts both.
func TestConfigRefusesAHeadRoute(t *testing.T) {
	for _, route := range []string{"HEAD /ping", "HEAD example.com/ping", "HEAD  /check", `HEAD\t/ping`} {
		_, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", "POLICIES": `[{"name":"a","limit":2,"window":"60s","routes":["` + route + `"]}]`}), envconfig.Lambda)
		if err == nil || !strings.Contains(err.Error(), "HEAD") || !strings.Contains(err.Error(), "GET") {
			t.Errorf("route %q: %v; want it refused, naming the GET route", route, err)
		}
	}
	if _, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", "POLICIES": `[{"name":"a","limit":2,"window":"60s","routes":["GET /ping","/HEAD"]}]`}), envconfig.Lambda); err != nil {
		t.Errorf("GET /ping and /HEAD: %v", err)
	}
}

// TestConfigNamesAJournalModeAsWritten: an unknown JOURNAL_MODE is named
// as it was written, with the modes this host takes: the functions were
// offered WAL, which they refuse, and "bogus" was named "BOGUS".
func TestConfigNamesAJournalModeAsWritten(t *testing.T) {
	for host, want := range map[envconfig.Host]string{
		envconfig.Lambda: `JOURNAL_MODE: "bogus" is not DELETE, TRUNCATE or PERSIST`,
		envconfig.Local:  `JOURNAL_MODE: "bogus" is not DELETE, TRUNCATE, PERSIST or WAL`,
	} {
		_, err := envconfig.Read(env(map[string]string{"DB_PATH": "x", "JOURNAL_MODE": "bogus"}), host)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Count(err.Error(), "JOURNAL_MODE") != 1 {
			t.Errorf("host %v: %v, want once %q", host, err, want)
		}
	}
}

// TestConfigRefusesADBPathOfSpaces: DB_PATH=" " made a database file named
// " " in the working directory, where every other setting refuses a lone
// space.
func TestConfigRefusesADBPathOfSpaces(t *testing.T) {
	for _, host := range []envconfig.Host{envconfig.Lambda, envconfig.Local} {
		if _, err := envconfig.Read(env(map[string]string{"DB_PATH": " "}), host); err == nil || !strings.Contains(err.Error(), "DB_PATH:") {
			t.Errorf("host %v: DB_PATH=\" \": %v, want it refused", host, err)
		}
	}
}
