//go:build linux

package functions_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ft251/ratelimit/internal/lambdatest"
)

// adminRequest is a request to the admin function as API Gateway sends it
// with IAM authorization: the principal that signed it in the authorizer.
func adminRequest(t *testing.T, method, path, body string) []byte {
	return edit(t, request(t, method, path, ""), func(e map[string]any) {
		rc := e["requestContext"].(map[string]any)
		rc["authorizer"] = map[string]any{"iam": map[string]any{
			"accountId": "123456789012", "userArn": "arn:aws:iam::123456789012:user/ops", "callerId": "AIDAEXAMPLE",
		}}
		if body != "" {
			e["body"] = body
			e["headers"].(map[string]any)["content-type"] = "application/json"
		}
	})
}

// TestAdminThroughTheRuntime: an override set through the admin function
// (the real runtime, through the emulator) changes the next decision of
// the ping function, another execution environment on the same file; the
// admin function logs the IAM principal that asked.
func TestAdminThroughTheRuntime(t *testing.T) {
	t.Parallel()
	env := []string{"DB_PATH=" + filepath.Join(t.TempDir(), "ratelimit.db"), "RATE_LIMIT=2", "WINDOW_SECONDS=" + longWindow}
	ping, admin := startEmulator(t, "ping", env...), startEmulator(t, "admin", env...)
	dave := withKey(t, lambdatest.Event(t, "ping.json"), "dave")
	for i, want := range []int{200, 200, 429} {
		if resp := mustHTTP(t, ping, dave); resp.StatusCode != want {
			t.Fatalf("ping %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	resp := mustHTTP(t, admin, adminRequest(t, "PUT", "/admin/overrides/ping/dave", `{"limit": 10}`))
	if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 200 || b["limit"] != 10.0 || b["key"] != "dave" {
		t.Fatalf("PUT: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := mustHTTP(t, ping, dave); resp.StatusCode != 200 || lambdatest.Header(resp, "RateLimit-Policy") != `"ping";q=10;w=`+longWindow {
		t.Errorf("ping after the override: %d %v, want 200 under the limit of 10", resp.StatusCode, resp.Headers)
	}
	if resp := mustHTTP(t, admin, adminRequest(t, "DELETE", "/admin/counters/ping/dave", "")); resp.StatusCode != 204 {
		t.Errorf("reset: %d %s", resp.StatusCode, resp.Body)
	}
	if resp := mustHTTP(t, admin, adminRequest(t, "GET", "/admin/overrides/nope/dave", "")); resp.StatusCode != 404 {
		t.Errorf("an unknown policy: %d, want 404", resp.StatusCode)
	}
	admin.stop()
	if logs := admin.logs.String(); !strings.Contains(logs, `"by":"arn:aws:iam::123456789012:user/ops"`) || !strings.Contains(logs, `"action":"set override"`) {
		t.Errorf("the admin function's log does not name the principal and the action:\n%s", logs)
	}
}
