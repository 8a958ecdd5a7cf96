package main_test

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ft251/ratelimit/internal/dynamotest"
)

// pingStatus sends GET /ping for key to addr and returns the status and
// the RateLimit-Policy header.
func pingStatus(t *testing.T, addr, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/ping", nil)
	req.Header.Set("X-Client-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("RateLimit-Policy")
}

func adminCall(t *testing.T, method, url, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// overrideAcrossProcesses: an override set through one local server's
// admin routes changes the next decision of another server on the same
// store, and its deletion does too; a reset through the admin routes lets
// the key in again there. The other server serves no admin routes: 404.
func overrideAcrossProcesses(t *testing.T, env ...string) {
	policy := `POLICIES=[{"name":"ping","limit":2,"window":"30d"}]`
	admin, _, a := startLocalServer(t, t.TempDir(), append([]string{policy, "ADMIN=on"}, env...)...)
	t.Cleanup(func() { a.Process.Kill(); a.Wait() })
	other, _, b := startLocalServer(t, t.TempDir(), append([]string{policy}, env...)...)
	t.Cleanup(func() { b.Process.Kill(); b.Wait() })

	for i, want := range []int{200, 200, 429} {
		if got, _ := pingStatus(t, other, "carol"); got != want {
			t.Fatalf("ping %d: %d, want %d", i+1, got, want)
		}
	}
	if code := adminCall(t, "PUT", "http://"+admin+"/admin/overrides/ping/carol", `{"limit": 5}`); code != 200 {
		t.Fatalf("PUT: %d", code)
	}
	if got, policy := pingStatus(t, other, "carol"); got != 200 || policy != `"ping";q=5;w=2592000` {
		t.Errorf("the other server's next decision: %d %q, want 200 under the override's 5 (4 of 5 counted)", got, policy)
	}
	if code := adminCall(t, "DELETE", "http://"+admin+"/admin/overrides/ping/carol", ""); code != 204 {
		t.Fatalf("DELETE: %d", code)
	}
	if got, policy := pingStatus(t, other, "carol"); got != 429 || policy != `"ping";q=2;w=2592000` {
		t.Errorf("after the delete: %d %q, want 429 under the policy's 2", got, policy)
	}
	if code := adminCall(t, "DELETE", "http://"+admin+"/admin/counters/ping/carol", ""); code != 204 {
		t.Fatalf("reset: %d", code)
	}
	if got, _ := pingStatus(t, other, "carol"); got != 200 {
		t.Errorf("after the reset: %d, want 200", got)
	}
	if code := adminCall(t, "GET", "http://"+other+"/admin/overrides/ping/carol", ""); code != 404 {
		t.Errorf("admin routes without ADMIN=on: %d, want 404", code)
	}
}

// TestAnOverrideReachesAnotherProcessOnOneFile: two local servers on one
// SQLite file.
func TestAnOverrideReachesAnotherProcessOnOneFile(t *testing.T) {
	t.Parallel()
	overrideAcrossProcesses(t, "DB_PATH="+filepath.Join(t.TempDir(), "shared.db"))
}

// TestAnOverrideReachesAnotherProcessOnOneTable: two local servers on one
// DynamoDB table.
func TestAnOverrideReachesAnotherProcessOnOneTable(t *testing.T) {
	t.Parallel()
	endpoint := dynamotest.Endpoint(t)
	table := dynamotest.CreateTable(t, endpoint)
	overrideAcrossProcesses(t, append([]string{"STORE=dynamodb", "TABLE_NAME=" + table, "DYNAMODB_ENDPOINT=" + endpoint}, dynamotest.Env...)...)
}
