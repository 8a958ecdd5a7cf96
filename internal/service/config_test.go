package service_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/rejectcache"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/limiter"
)

// The ping function and the local server build their handler from the
// configuration with envconfig.Service: what the environment turns on must be on.
func TestConfiguredFollowsTheEnvironment(t *testing.T) {
	cfgFrom := func(env map[string]string) envconfig.Config {
		env["DB_PATH"] = "x"
		c, err := readEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	store := newFixture(t, service.Options{}).store

	var out bytes.Buffer
	opts := envconfig.Service(cfgFrom(map[string]string{"REJECT_CACHE": "on", "RATE_LIMIT": "1", "FAIL_MODE": "open", "METRICS_NAMESPACE": "RateLimit/x"}), store, &out)
	if _, ok := opts.Store.(*rejectcache.Cache); !ok || opts.FailMode != limiter.FailOpen || opts.Rules[0].Policy.Limit != 1 || opts.Metrics == nil {
		t.Fatalf("options %+v: want a reject cache, fail open, limit 1 and metrics", opts)
	}
	f := newFixture(t, opts)
	for range 3 {
		f.do(t, "GET", "/ping", "X-Client-Key", "alice")
	}
	if w := f.do(t, "GET", "/ping", "X-Client-Key", "alice"); w.Code != http.StatusTooManyRequests || !strings.Contains(f.logs.String(), `"from_memory":true`) {
		t.Errorf("a key already denied was not denied from memory: %d\n%s", w.Code, f.logs)
	}
	if n := strings.Count(out.String(), `"Namespace":"RateLimit/x"`); n != 4 {
		t.Errorf("%d EMF lines in the configured namespace, want 4:\n%s", n, out.String())
	}

	opts = envconfig.Service(cfgFrom(map[string]string{"METRICS": "off"}), store, &out)
	if opts.Store != limiter.Store(store) || opts.Metrics != nil {
		t.Errorf("options %+v: want the store itself and no metrics", opts)
	}
}

// readEnv reads the configuration as the Lambda functions do.
func readEnv(getenv func(string) string) (envconfig.Config, error) {
	return envconfig.Read(getenv, envconfig.Lambda)
}
