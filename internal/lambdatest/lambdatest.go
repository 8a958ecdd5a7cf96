// Package lambdatest is what the tests of the Lambda functions share,
// whether they call the handlers in process or invoke the built functions
// through the Runtime Interface Emulator: the event fixtures in the
// repository's events/ directory, and reading an HTTP API response.
package lambdatest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
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
