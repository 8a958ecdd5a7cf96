package service_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/memory"
)

// TestARouteHostNoRequestCanMatchIsRefused: requests' hosts are matched
// in lower case, without a port or a trailing dot, so a pattern whose host
// has a capital, a port or a trailing dot matches no request at all. Such
// routes were taken, by the middleware, the server and -check alike, and
// counted nothing ("EXAMPLE.com/ping" beside a request to EXAMPLE.com:
// {"counted": false}); they are refused, naming the host to write.
func TestARouteHostNoRequestCanMatchIsRefused(t *testing.T) {
	p := limiter.Policy{Name: "api", Limit: 3, Window: time.Minute}
	for route, want := range map[string]string{
		"EXAMPLE.com/ping":           `route "EXAMPLE.com/ping": host "EXAMPLE.com" matches no request: write "example.com"`,
		"GET example.com./ping":      `route "GET example.com./ping": host "example.com." matches no request: write "example.com"`,
		"127.0.0.1:3000/ping":        `route "127.0.0.1:3000/ping": host "127.0.0.1:3000" matches no request: write "127.0.0.1"`,
		"POST  Api.Example.com:443/": `host "Api.Example.com:443" matches no request: write "api.example.com"`,
	} {
		_, err := service.Middleware(service.Options{Store: memory.New(), Rules: []limiter.Rule{{Policy: p, Routes: []string{route}}}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("route %q: %v, want an error saying %s", route, err, want)
		}
		if errs := service.RouteErrors([]limiter.Rule{{Policy: p, Routes: []string{route}}}); len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("RouteErrors(%q) = %v, want one error saying %s", route, errs, want)
		}
	}
	for _, route := range []string{"example.com/ping", "GET api.example.com/", "127.0.0.1/ping", "/ping", "GET /a:b/{c}"} {
		if _, err := service.Middleware(service.Options{Store: memory.New(), Rules: []limiter.Rule{{Policy: p, Routes: []string{route}}}}); err != nil {
			t.Errorf("route %q: %v, want it taken", route, err)
		}
	}
}
