//go:build linux

package functions_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/lambdatest"
)

// request is the ping fixture turned into a request of method on path.
func request(t *testing.T, method, path, user string) []byte {
	return edit(t, lambdatest.Event(t, "ping.json"), func(e map[string]any) {
		e["rawPath"], e["routeKey"] = path, "$default"
		rc := e["requestContext"].(map[string]any)
		rc["routeKey"] = "$default"
		h := rc["http"].(map[string]any)
		h["method"], h["path"] = method, path
		headers := e["headers"].(map[string]any)
		delete(headers, "x-client-key")
		if user != "" {
			headers["x-user"] = user
		}
	})
}

// TestExampleOrdersThroughTheRuntime runs examples/orders, a user's own
// API behind the middleware, as Lambda runs it (the real runtime, through
// the Runtime Interface Emulator): reads at 2 a minute, orders at a cost
// of 5 of 100 an hour, answered with the limiter's headers and problems.
func TestExampleOrdersThroughTheRuntime(t *testing.T) {
	t.Parallel()
	orders := startEmulator(t, "orders", "DB_PATH="+filepath.Join(t.TempDir(), "orders.db"))
	clearOfTheMinutesEdge()
	for i, want := range []int{200, 200, 429} {
		resp := mustHTTP(t, orders, request(t, "GET", fmt.Sprintf("/orders/%d", i+1), ""))
		if resp.StatusCode != want || lambdatest.Header(resp, "RateLimit-Policy") != `"reads";q=2;w=60` ||
			lambdatest.Header(resp, "X-RateLimit-Remaining") != strconv.Itoa(max(1-i, 0)) {
			t.Fatalf("read %d: %d %v %s, want %d with the reads policy's headers", i+1, resp.StatusCode, resp.Headers, resp.Body, want)
		}
		if want == 429 {
			ra, err := strconv.Atoi(lambdatest.Header(resp, "Retry-After"))
			if b := lambdatest.JSONBody(t, resp); err != nil || ra < 1 || ra > 60 || b["type"] != "urn:ratelimit:problem:rate-limit-exceeded" {
				t.Errorf("read 3: %v %s, want the 429 problem with Retry-After", resp.Headers, resp.Body)
			}
		} else if b := lambdatest.JSONBody(t, resp); b["order"] != strconv.Itoa(i+1) {
			t.Errorf("read %d reached the handler? %s", i+1, resp.Body)
		}
	}
	for i := range 20 {
		resp := mustHTTP(t, orders, request(t, "POST", "/orders", "ann"))
		if resp.StatusCode != 201 || lambdatest.Header(resp, "X-RateLimit-Remaining") != strconv.Itoa(95-5*i) {
			t.Fatalf("order %d: %d %v, want 201 with %d left", i+1, resp.StatusCode, resp.Headers, 95-5*i)
		}
	}
	if resp := mustHTTP(t, orders, request(t, "POST", "/orders", "ann")); resp.StatusCode != 429 || !strings.Contains(lambdatest.Header(resp, "RateLimit"), `"orders";r=0;`) {
		t.Errorf("order 21: %d %v, want 429", resp.StatusCode, resp.Headers)
	}
	if resp := mustHTTP(t, orders, request(t, "GET", "/health", "")); resp.StatusCode != 200 || lambdatest.Header(resp, "RateLimit") != "" {
		t.Errorf("health: %d %v, want 200 without rate limit headers", resp.StatusCode, resp.Headers)
	}
}

// clearOfTheMinutesEdge waits, if need be, until the minute has a few
// seconds left: the function reads the real clock, and a script of
// 2-a-minute requests must fall in one window.
func clearOfTheMinutesEdge() {
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < 5*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
}
