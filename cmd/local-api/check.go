package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/stores"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// checkConfig reads the configuration as the server would and prints the
// whole of it that takes effect, returning 0; or prints every problem to
// errOut and returns 2. It also says whether the Lambda functions would
// accept the same variables (with the DB_PATH the template gives them),
// which is how a POLICIES value is tried before it is deployed.
func checkConfig(out, errOut io.Writer, getenv func(string) string) int {
	c, err := readConfig(getenv)
	// The server would fail to listen on an address of no interface here,
	// or a name that resolves to none: tried, and let go at once, beside
	// the other problems. A port in use is not the configuration's: the
	// server running now, or sam local, may hold it.
	addr, inUse := cmp.Or(getenv("ADDR"), defaultAddr), false
	var ce *envconfig.ConfigError
	if _, _, serr := net.SplitHostPort(addr); serr == nil && (err == nil || errors.As(err, &ce) && !mentions(ce, "ADDR:")) {
		switch ln, lerr := net.Listen("tcp", addr); {
		case errors.Is(lerr, syscall.EADDRINUSE):
			inUse = true
		case lerr != nil && ce != nil:
			ce.Problems = append(ce.Problems, listenError(addr, lerr))
		case lerr != nil:
			err = &envconfig.ConfigError{Problems: []error{listenError(addr, lerr)}}
		default:
			ln.Close()
		}
	}
	if err != nil {
		fmt.Fprintln(errOut, "local-api:", err)
		return 2
	}
	// In use is said on the listen line, not as a line of its own: it
	// is this machine's now, and what -check prints is otherwise the
	// configuration's alone (the documentation shows it line by line).
	listen := c.Addr
	if inUse {
		listen += inUseNote
	}
	describeConfig(out, c, listen, gcTarget(getenv))
	if s := c.Store; s.Kind == stores.SQLite && s.Shards > 1 && (s.JournalMode == "" || s.JournalMode == "DELETE") {
		fmt.Fprintln(out, "advice: with several shards, JOURNAL_MODE=TRUNCATE spares each decision creating and deleting a journal in the files' one directory, which held the EFS model near 96 decisions a second whatever the count (docs/capacity.md)")
	}
	if getenv("POLICIES") != "" && (getenv("RATE_LIMIT") != "" || getenv("WINDOW_SECONDS") != "") {
		fmt.Fprintln(out, "(POLICIES replaces RATE_LIMIT and WINDOW_SECONDS, which are ignored)")
	}
	// What the functions read, with the DB_PATH the template gives them
	// when none is set here, as the functions read it.
	_, err = envconfig.Read(func(k string) string {
		if v := getenv(k); v != "" || k != "DB_PATH" {
			return v
		}
		return "/mnt/efs/ratelimit.db"
	}, envconfig.Lambda)
	var problems *envconfig.ConfigError
	switch {
	case errors.As(err, &problems):
		fmt.Fprintln(out, "The Lambda functions would refuse it:\n"+problems.List())
	case err != nil:
		fmt.Fprintln(out, "The Lambda functions would refuse it:", err)
	default:
		fmt.Fprintln(out, "The Lambda functions would accept it.")
	}
	return 0
}

// mentions reports whether one of ce's problems begins with prefix.
func mentions(ce *envconfig.ConfigError, prefix string) bool {
	for _, p := range ce.Problems {
		if strings.HasPrefix(p.Error(), prefix) {
			return true
		}
	}
	return false
}

// inUseNote follows the listen address when another process listens there.
const inUseNote = " (in use now: the server could not listen there until it is free)"

// describeConfig prints c as a person checking it reads it, with the
// collector's target gc (gcTarget).
func describeConfig(w io.Writer, c config, listen, gc string) {
	s := c.Store
	switch s.Kind {
	case stores.Memory:
		fmt.Fprintln(w, "store: memory, this process alone (lost when it stops)")
	case stores.DynamoDB:
		fmt.Fprintf(w, "store: dynamodb, table %s, endpoint %s\n", s.Table, orDefault(s.Endpoint, "AWS"))
	default:
		fmt.Fprintf(w, "store: sqlite, %s, journal %s, shards %d\n", s.Path, orDefault(s.JournalMode, sqlite.DefaultJournalMode), max(s.Shards, 1))
	}
	fmt.Fprintf(w, "busy timeout: %v\nfail mode: %s\nreject cache: %s\naudit retention: %s\n",
		s.BusyTimeout, c.FailMode, onOff(c.RejectCache), retention(s))
	fmt.Fprintf(w, "metrics: %s\n", metricsLine(c.Config))
	fmt.Fprintf(w, "listen: %s\nprune every: %v\nadmin routes: %s\ngc target: %s\npolicies:\n", listen, c.PruneInterval, onOff(c.Admin), gc)
	for _, r := range c.Rules {
		fmt.Fprintln(w, "  "+describe(r))
	}
	describeRoutes(w, c)
}

// describeRoutes says which policies count the service's own routes, and
// which policies count none of them: a rule for your own API's routes
// belongs in your middleware, or is checked by name through POST /check.
// A rule whose patterns name a host ("api.example.com/ping") counts only
// requests to that host: the routes are told for every host the patterns
// name, as the server matches them (service.Guarding).
func describeRoutes(w io.Writer, c config) {
	counting := map[string]bool{}
	for _, host := range hostsOf(c.Rules) {
		at := ""
		if host != "" {
			at = " (Host: " + host + ")"
		}
		ping := service.Guarding(c.Rules, http.MethodGet, host, service.RoutePing)
		check := service.Guarding(c.Rules, http.MethodPost, host, service.RouteCheck)
		if len(ping) == 0 {
			fmt.Fprintf(w, "GET /ping%s: no policy counts it; it answers 200 {\"counted\": false}\n", at)
		} else {
			fmt.Fprintf(w, "GET /ping%s: counted under %s\n", at, strings.Join(ping, ", "))
		}
		if len(check) == 0 {
			fmt.Fprintf(w, "POST /check%s: every check must name its \"policies\"\n", at)
		} else {
			fmt.Fprintf(w, "POST /check%s: without \"policies\", checked under %s\n", at, strings.Join(check, ", "))
		}
		for _, name := range append(ping, check...) {
			counting[name] = true
		}
	}
	for _, r := range c.Rules {
		if !counting[r.Policy.Name] {
			fmt.Fprintf(w, "note: %s counts none of this service's routes (routes %v): only POST /check naming it, or your own middleware, counts under it\n", r.Policy.Name, r.Routes)
		}
		for _, p := range r.Routes {
			if m, _ := service.PatternParts(p); m != "" && !slices.Contains(httpMethods, m) {
				fmt.Fprintf(w, "note: %s: route %q has the method %q, which is none of HTTP's own (%s): it counts only requests with that method, exactly so\n",
					r.Policy.Name, p, m, strings.Join(httpMethods, ", "))
			}
		}
	}
}

// httpMethods are the methods of RFC 9110 and RFC 5789 (PATCH), as net/http
// names them. A route's method is any token to ServeMux, compared exactly:
// "GETT /x" and "get /x" are valid patterns that count nothing a client
// sends, so -check notes them, and refuses nothing (a method of one's own,
// WebDAV's say, is allowed).
var httpMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace}

// hostsOf are the hosts the rules' patterns name (service.PatternParts),
// after "" (any host).
func hostsOf(rules []limiter.Rule) []string {
	hosts := []string{""}
	for _, r := range rules {
		for _, p := range r.Routes {
			if _, host := service.PatternParts(p); host != "" && !slices.Contains(hosts, host) {
				hosts = append(hosts, host)
			}
		}
	}
	return hosts
}

// describe says what a rule limits, and which route patterns it guards.
func describe(r limiter.Rule) string {
	p, shadow := r.Policy, ""
	kind := p.Algorithm.String() + " window"
	if p.Algorithm == limiter.GCRA {
		kind = fmt.Sprintf("gcra, burst %d", p.Capacity())
	}
	if r.Cost > 1 {
		kind += fmt.Sprintf(", cost %d", r.Cost)
	}
	if p.Shadow {
		shadow = " shadow"
	}
	return fmt.Sprintf("%s: %d per %v, %s, key %s, routes %v%s%s", p.Name, p.Limit, p.Window, kind, envconfig.KeySourceString(r.KeySource), r.Routes, describeTiers(r), shadow)
}

// describeTiers says what a rule's tiers allow, smallest limit first, and
// where a request names its tier: ", tiers pro 1000 (burst 200),
// enterprise 10000 by claim plan"; nothing for a rule without tiers.
func describeTiers(r limiter.Rule) string {
	p := r.Policy
	if len(p.Tiers) == 0 {
		return ""
	}
	names := slices.SortedFunc(maps.Keys(p.Tiers), func(a, b string) int {
		return cmp.Or(cmp.Compare(p.Tiers[a].Limit, p.Tiers[b].Limit), cmp.Compare(a, b))
	})
	tiers := make([]string, len(names))
	for i, name := range names {
		t := decide.Tiered(p, name)
		tiers[i] = fmt.Sprintf("%s %d", name, t.Limit)
		if p.Algorithm == limiter.GCRA {
			tiers[i] += fmt.Sprintf(" (burst %d)", t.Capacity())
		}
	}
	by := "by POST /check's \"tier\" only"
	switch {
	case r.TierClaim != "":
		by = "by claim " + r.TierClaim
	case r.TierHeader != "":
		by = "by header " + r.TierHeader
	}
	return ", tiers " + strings.Join(tiers, ", ") + " " + by
}

func retention(s stores.Config) string {
	if s.AuditRetention == 0 {
		return "forever"
	}
	return s.AuditRetention.String()
}

func metricsLine(c envconfig.Config) string {
	if !c.Metrics {
		return "off"
	}
	return "emf, namespace " + orDefault(c.MetricsNamespace, "RateLimit")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
