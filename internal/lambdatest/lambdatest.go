// Package lambdatest is what the tests of the Lambda functions share,
// whether they call the handlers in process or invoke the built functions
// through the Runtime Interface Emulator: the event fixtures in the
// repository's events/ directory, and reading an HTTP API response.
package lambdatest

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/ft251/ratelimit/internal/service"
)

// Event reads the fixture events/name as it is, to be sent byte for byte.
func Event(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(eventsDir(tb), name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// EventNames are the names of every fixture in events/.
func EventNames(tb testing.TB) []string {
	tb.Helper()
	paths, err := filepath.Glob(filepath.Join(eventsDir(tb), "*.json"))
	if err != nil || len(paths) == 0 {
		tb.Fatalf("no event fixtures: %v", err)
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	return names
}

// eventsDir is the repository's events/, found beside go.mod above the
// test's working directory (go test runs each package's tests in its own
// directory, at any depth).
func eventsDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "events")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("no go.mod above the working directory: cannot find events/")
		}
		dir = parent
	}
}

// ReadEvent decodes the fixture events/name as a T, as the Lambda runtime
// decodes an invocation.
func ReadEvent[T any](tb testing.TB, name string) T {
	tb.Helper()
	var e T
	if err := json.Unmarshal(Event(tb, name), &e); err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return e
}

// Header looks a response header up by name, ignoring case as HTTP does:
// the adapter writes Go's canonical names (Ratelimit-Policy).
func Header(resp events.APIGatewayV2HTTPResponse, name string) string {
	for k, v := range resp.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// JSONBody decodes the response's body as a JSON object, failing the test
// if it is not one.
func JSONBody(tb testing.TB, resp events.APIGatewayV2HTTPResponse) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &m); err != nil {
		tb.Fatalf("body %q is not JSON: %v", resp.Body, err)
	}
	return m
}

// NewAPI is service.New, failing the test for options it refuses.
func NewAPI(tb testing.TB, opts service.Options) *service.API {
	tb.Helper()
	api, err := service.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	return api
}

// Decode is the JSON object w holds, failing the test if it holds none.
func Decode(t testing.TB, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q is not JSON: %v", w.Body, err)
	}
	return m
}

// WantProblem checks that w is an RFC 9457 problem with the given status and
// type, for the given path, and returns it.
func WantProblem(t testing.TB, w *httptest.ResponseRecorder, status int, typ, path string) map[string]any {
	t.Helper()
	if w.Code != status {
		t.Errorf("status %d, want %d (body %s)", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	p := Decode(t, w)
	if p["type"] != typ || p["status"] != float64(status) || p["title"] != service.Title(status) || p["instance"] != path {
		t.Errorf("problem %v, want type %s, status %d, title %q, instance %s", p, typ, status, service.Title(status), path)
	}
	if d, _ := p["detail"].(string); d == "" {
		t.Errorf("problem has no detail: %v", p)
	}
	return p
}
