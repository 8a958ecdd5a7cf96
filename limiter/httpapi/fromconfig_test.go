package httpapi_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/ft251/ratelimit/internal/rejectcache"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/httpapi"
)

// The ping function and the local server build their handler from the
// configuration with FromConfig: what the environment turns on must be on.
func TestConfiguredFollowsTheEnvironment(t *testing.T) {
	cfgFrom := func(env map[string]string) limiter.Config {
		env["DB_PATH"] = "x"
		c, err := limiter.ConfigFromEnv(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	store := newFixture(t, httpapi.Options{}).store

	var out bytes.Buffer
	opts := httpapi.FromConfig(cfgFrom(map[string]string{"REJECT_CACHE": "on", "RATE_LIMIT": "1", "FAIL_MODE": "open", "METRICS_NAMESPACE": "RateLimit/x"}), store, &out)
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

	opts = httpapi.FromConfig(cfgFrom(map[string]string{"METRICS": "off"}), store, &out)
	if opts.Store != limiter.Store(store) || opts.Metrics != nil {
		t.Errorf("options %+v: want the store itself and no metrics", opts)
	}
}
