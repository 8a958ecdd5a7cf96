//go:build linux

// The Lambda Runtime Interface Emulator runs on Linux only, as Lambda does.

package functions_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/ft251/ratelimit/internal/dynamotest"
	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/internal/testbin"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// rieTool is the emulator's package, pinned in go.mod by `go get -tool`.
const rieTool = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// Bounds on waits. They only turn a hang into a failure; nothing here
// asserts how fast anything is.
const (
	startTimeout  = 30 * time.Second
	invokeTimeout = 30 * time.Second
	stopTimeout   = 10 * time.Second
)

// A 30-day window, the longest allowed. The functions read the real clock,
// so a test would have to run across a window edge to see two windows.
const longWindow = "2592000"

// functionNames are the subdirectories of functions/, one Lambda each.
var functionNames = []string{"ping", "status", "prune", "admin"}

// examples are the examples under examples/ that are Lambda functions, by
// the name their bootstrap is started under.
var examples = map[string]string{"orders": "./examples/orders"}

// bin holds the binaries TestMain builds once per test run (testbin: and
// reuses from the last run while their sources are unchanged).
var bin struct {
	rie       string
	bootstrap map[string]string // function name -> bootstrap
}

func TestMain(m *testing.M) {
	code := 1
	if err := build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	dynamotest.StopShared()
	os.Exit(code)
}

// build compiles the emulator and every function, two builds at a time
// (most of a build that finds its executable up to date is one go
// command's single-threaded hashing). A missing go command is a failure,
// not a reason to skip.
func build() error {
	root, err := filepath.Abs("..") // go test runs in functions/
	if err != nil {
		return err
	}
	// Each function is built as Lambda gets it: a static Linux executable
	// named bootstrap. Deployment builds GOARCH=arm64 with the same flags;
	// the host's architecture is used here so that the bootstrap runs on
	// this machine.
	lambda := func(pkg, tags string) testbin.Spec {
		return testbin.Spec{Dir: root, Pkg: pkg, Name: "bootstrap",
			Flags: []string{"-tags", tags, "-trimpath", "-ldflags=-s -w"},
			Env:   []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH}}
	}
	specs := map[string]testbin.Spec{"": {Dir: root, Pkg: rieTool}}
	for _, name := range functionNames {
		specs[name] = lambda("./functions/"+name, "lambda.norpc")
		// The lean builds a SQLite-only deployment may use: no DynamoDB
		// store, no AWS SDK.
		specs[name+"-nodynamodb"] = lambda("./functions/"+name, "lambda.norpc,nodynamodb")
	}
	// The example a user copies: their own API behind the middleware.
	for name, pkg := range examples {
		specs[name] = lambda(pkg, "lambda.norpc")
	}
	var mu sync.Mutex
	var errs []error
	paths := map[string]string{}
	turns := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for name, spec := range specs {
		wg.Go(func() {
			turns <- struct{}{}
			path, err := testbin.Path(spec)
			<-turns
			mu.Lock()
			defer mu.Unlock()
			paths[name], errs = path, append(errs, err)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	bin.rie = paths[""]
	delete(paths, "")
	bin.bootstrap = paths
	return nil
}

// emulator is one Lambda execution environment: the Runtime Interface
// Emulator running one function's bootstrap against its Runtime API.
type emulator struct {
	url    string
	client *http.Client
	// mu serialises invocations. An execution environment handles one
	// invocation at a time, and the pinned emulator does not answer a
	// second, concurrent one with a busy error: it logs "ReserveFailed:
	// AlreadyReserved", dereferences the missing reservation and crashes,
	// taking the in-flight invocation with it.
	mu sync.Mutex
	// parallel: the emulator is in its managed-instances mode, which runs
	// several invocations at once; they are not serialised.
	parallel bool
	logs     *lockedBuffer // what the emulator and the function wrote
	stop     func()        // stops it now rather than when the test ends
}

// startEmulator runs function's bootstrap under its own emulator, with
// env ("NAME=value") added to the Lambda variables, and stops it when the
// test ends. Its output is printed if the test fails.
func startEmulator(t testing.TB, function string, env ...string) *emulator {
	t.Helper()
	bootstrap := bin.bootstrap[function]
	if bootstrap == "" {
		t.Fatalf("no function %q", function)
	}
	// Each emulator gets its own invocation and Runtime API ports, so that
	// several can run side by side.
	addrs := freeAddrs(t, 2)
	addr, apiAddr := addrs[0], addrs[1]
	cmd := exec.Command(bin.rie,
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", apiAddr,
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	// The emulator hands its whole environment to the function, so it gets
	// only what is listed here: nothing from the test's environment leaks
	// into the configuration (nor AWS_LAMBDA_MAX_CONCURRENCY, which would
	// switch the emulator to another mode).
	cmd.Env = lambdaEnv(function, env...)
	return runEmulator(t, function, cmd, addr)
}

// lambdaEnv is the environment the emulator gives a function, with env
// added.
func lambdaEnv(function string, env ...string) []string {
	return append([]string{
		"AWS_LAMBDA_FUNCTION_NAME=" + function,
		"AWS_LAMBDA_FUNCTION_TIMEOUT=10", // as template.yaml has it
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128",
		"AWS_REGION=us-east-1",
	}, env...)
}

// runEmulator starts cmd, an emulator invoked at addr, and stops it when
// the test ends. Its output is printed if the test fails.
func runEmulator(t testing.TB, function string, cmd *exec.Cmd, addr string) *emulator {
	t.Helper()
	logs := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	// The bootstrap inherits the output; do not wait for it forever.
	cmd.WaitDelay = stopTimeout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(done)
	}()
	var once sync.Once
	stop := func() {
		select {
		case <-done:
			t.Errorf("%s emulator exited before the test stopped it: %v", function, waitErr)
		default:
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(stopTimeout):
				t.Logf("%s emulator still running %v after SIGTERM; killing it", function, stopTimeout)
				cmd.Process.Kill()
				<-done
			}
		}
		// Wait has returned, so nothing writes to logs any more.
		if t.Failed() {
			t.Logf("%s emulator output:\n%s", function, logs)
		}
	}
	t.Cleanup(func() { once.Do(stop) })

	deadline := time.Now().Add(startTimeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s emulator not listening on %s after %v: %v", function, addr, startTimeout, err)
		}
		select {
		case <-done:
			t.Fatalf("%s emulator exited before listening", function)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return &emulator{
		url:    "http://" + addr + "/2015-03-31/functions/function/invocations",
		client: &http.Client{Timeout: invokeTimeout},
		logs:   logs,
		stop:   func() { once.Do(stop) },
	}
}

// lockedBuffer collects an emulator's output, which its process writes
// while a test may read it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freeAddrs returns n loopback addresses that were free a moment ago. The
// listeners are held until all n are chosen, so the n differ.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs[i] = l.Addr().String()
	}
	return addrs
}

// invoke sends event as an invocation and returns the emulator's answer:
// the function's response or error object, as Lambda's Invoke API returns it.
func (e *emulator) invoke(event []byte) (int, []byte, error) {
	if !e.parallel {
		e.mu.Lock()
		defer e.mu.Unlock()
	}
	resp, err := e.client.Post(e.url, "application/json", bytes.NewReader(event))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// invokeHTTP invokes an HTTP API function and decodes its response.
func (e *emulator) invokeHTTP(event []byte) (events.APIGatewayV2HTTPResponse, error) {
	var resp events.APIGatewayV2HTTPResponse
	status, body, err := e.invoke(event)
	if err != nil {
		return resp, err
	}
	if status != http.StatusOK {
		return resp, fmt.Errorf("emulator answered %d: %s", status, body)
	}
	if err := json.Unmarshal(body, &resp); err != nil || resp.StatusCode == 0 {
		return resp, fmt.Errorf("not an HTTP API response: %s", body)
	}
	return resp, nil
}

func mustHTTP(t *testing.T, e *emulator, event []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := e.invokeHTTP(event)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// edit returns event with change applied to its JSON object; the fields
// change does not touch stay as they were.
func edit(t testing.TB, event []byte, change func(e map[string]any)) []byte {
	t.Helper()
	var e map[string]any
	if err := json.Unmarshal(event, &e); err != nil {
		t.Fatal(err)
	}
	change(e)
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withKey returns an HTTP API event whose X-Client-Key is key.
func withKey(t testing.TB, event []byte, key string) []byte {
	t.Helper()
	return edit(t, event, func(e map[string]any) { e["headers"].(map[string]any)["x-client-key"] = key })
}

// queryStrings runs a query of one column of strings and returns them.
func queryStrings(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestPingUntil429ThenStatusReadsTheCount(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "ratelimit.db")
	cfg := []string{"DB_PATH=" + dbPath, "RATE_LIMIT=3", "WINDOW_SECONDS=" + longWindow}
	ping := startEmulator(t, "ping", cfg...)

	event := lambdatest.Event(t, "ping.json")
	var resp events.APIGatewayV2HTTPResponse
	var before, after time.Time
	for i, want := range []int{200, 200, 200, 429} {
		before = time.Now()
		resp = mustHTTP(t, ping, event)
		after = time.Now()
		if resp.StatusCode != want {
			t.Fatalf("ping %d: %d %s, want %d", i+1, resp.StatusCode, resp.Body, want)
		}
		if lambdatest.Header(resp, "RateLimit-Policy") != `"ping";q=3;w=2592000` {
			t.Errorf("ping %d: RateLimit-Policy missing or wrong: %v", i+1, resp.Headers)
		}
		if want == 200 {
			if b := lambdatest.JSONBody(t, resp); b["key"] != "alice" || b["count"] != float64(i+1) || b["remaining"] != float64(2-i) {
				t.Errorf("ping %d: body %v, want key alice, count %d, remaining %d", i+1, b, i+1, 2-i)
			}
		}
	}

	// The 429, header by header.
	if got := lambdatest.Header(resp, "Content-Type"); got != "application/problem+json" {
		t.Errorf("Content-Type = %q, want application/problem+json", got)
	}
	retryAfter, err := strconv.ParseInt(lambdatest.Header(resp, "Retry-After"), 10, 64)
	if err != nil || retryAfter < 1 || retryAfter > 2592000 {
		t.Errorf("Retry-After = %q, want whole seconds from 1 to the window", lambdatest.Header(resp, "Retry-After"))
	}
	if m := regexp.MustCompile(`^"ping";r=0;t=(\d+)$`).FindStringSubmatch(lambdatest.Header(resp, "RateLimit")); m == nil {
		t.Errorf("RateLimit = %q, want \"ping\";r=0;t=<seconds>", lambdatest.Header(resp, "RateLimit"))
	} else if m[1] != strconv.FormatInt(retryAfter, 10) {
		t.Errorf("RateLimit t=%s but Retry-After %d: both count down to the same reset", m[1], retryAfter)
	}
	for name, want := range map[string]string{"X-RateLimit-Limit": "3", "X-RateLimit-Remaining": "0"} {
		if got := lambdatest.Header(resp, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	// X-RateLimit-Reset is the window's end: a whole number of windows since
	// the epoch, Retry-After seconds (rounded up) after the moment the
	// function read its clock, which lies between before and after.
	reset, err := strconv.ParseInt(lambdatest.Header(resp, "X-RateLimit-Reset"), 10, 64)
	if err != nil || reset%2592000 != 0 {
		t.Errorf("X-RateLimit-Reset = %q, want a window end in Unix seconds", lambdatest.Header(resp, "X-RateLimit-Reset"))
	} else if at := reset - retryAfter; at < before.Unix()-1 || at > after.Unix() {
		t.Errorf("X-RateLimit-Reset %d - Retry-After %d = %d, not the time of the request (%d to %d)",
			reset, retryAfter, at, before.Unix(), after.Unix())
	}
	want := map[string]any{
		"type":     "urn:ratelimit:problem:rate-limit-exceeded",
		"title":    "Too Many Requests",
		"status":   float64(429),
		"detail":   "Rate limit of 3 requests per 2592000s exceeded for key 'alice'.",
		"instance": "/ping",
		// The policies that rejected the request, by name.
		"policies": []any{map[string]any{"name": "ping", "limit": float64(3), "window_seconds": float64(2592000),
			"algorithm": "fixed", "retry_after": float64(retryAfter), "denied": true}},
	}
	if b := lambdatest.JSONBody(t, resp); !reflect.DeepEqual(b, want) {
		t.Errorf("429 body = %v\nwant %v", b, want)
	}

	// A status function on the same file sees the four attempts, and
	// reading twice shows that reading counts nothing.
	status := startEmulator(t, "status", cfg...)
	for i := range 2 {
		resp := mustHTTP(t, status, lambdatest.Event(t, "status.json"))
		b := lambdatest.JSONBody(t, resp)
		if resp.StatusCode != 200 || b["key"] != "alice" || b["count"] != float64(4) || b["remaining"] != float64(0) || b["limit"] != float64(3) {
			t.Errorf("status read %d: %d %v, want 200 with count 4, remaining 0", i+1, resp.StatusCode, b)
		}
	}
	resp = mustHTTP(t, status, lambdatest.Event(t, "status-no-key.json"))
	if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 400 || lambdatest.Header(resp, "Content-Type") != "application/problem+json" ||
		b["status"] != float64(400) || b["type"] != "urn:ratelimit:problem:invalid-query" || b["instance"] != "/status" {
		t.Errorf("status without key: %d %v %v, want a 400 problem", resp.StatusCode, resp.Headers, b)
	}

	db := sqlitetest.Inspect(t, dbPath)
	if n := sqlitetest.QueryInt(t, db, `SELECT count FROM rate_limit_windows WHERE key = 'alice'`); n != 4 {
		t.Errorf("stored count %d, want 4", n)
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls WHERE key = 'alice' AND route = 'GET /ping' AND request_id = 'Qx1aBc2dIAMEVxQ='`); n != 3 {
		t.Errorf("%d audit rows, want one per allowed ping (3), with API Gateway's request id", n)
	}
}

func TestPingWithoutKeyUsesTheFallbackKey(t *testing.T) {
	t.Parallel()
	ping := startEmulator(t, "ping", "DB_PATH="+filepath.Join(t.TempDir(), "ratelimit.db"), "WINDOW_SECONDS="+longWindow)
	resp := mustHTTP(t, ping, lambdatest.Event(t, "ping-no-key.json"))
	if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 200 || b["key"] != "127.0.0.1" || b["count"] != float64(1) {
		t.Errorf("ping without key: %d %v, want 200 for key 127.0.0.1", resp.StatusCode, b)
	}
}

func TestMalformedEventsAreAnsweredAndTheNextInvocationWorks(t *testing.T) {
	t.Parallel()
	ping := startEmulator(t, "ping", "DB_PATH="+filepath.Join(t.TempDir(), "ratelimit.db"), "RATE_LIMIT=10", "WINDOW_SECONDS="+longWindow)
	event := withKey(t, lambdatest.Event(t, "ping.json"), "malformed")
	count := 0
	pingOK := func(after string) {
		t.Helper()
		count++
		resp := mustHTTP(t, ping, event)
		if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 200 || b["count"] != float64(count) {
			t.Fatalf("ping after %s: %d %v, want 200 with count %d (nothing malformed counted)", after, resp.StatusCode, b, count)
		}
	}
	pingOK("start")

	// An event that does not decode never reaches the handler: the runtime
	// client reports an invocation error, which the emulator relays as the
	// response body. (Lambda's Invoke API also answers 200 for a function
	// error and flags it with X-Amz-Function-Error, which the emulator
	// does not set.)
	for _, c := range []struct {
		name, event, errorType, message string
	}{
		{"truncated JSON", `{"version":`, "", "unexpected EOF"},
		{"array", `[1,2]`, "UnmarshalTypeError", "events.APIGatewayV2HTTPRequest"},
	} {
		status, body, err := ping.invoke([]byte(c.event))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var fnErr struct {
			ErrorMessage string `json:"errorMessage"`
			ErrorType    string `json:"errorType"`
		}
		if err := json.Unmarshal(body, &fnErr); err != nil || status != 200 || fnErr.ErrorType == "" ||
			(c.errorType != "" && fnErr.ErrorType != c.errorType) || !strings.Contains(fnErr.ErrorMessage, c.message) {
			t.Errorf("%s: %d %s, want an invocation error of type %q mentioning %q", c.name, status, body, c.errorType, c.message)
		}
		pingOK(c.name)
	}

	// An event that decodes but is no HTTP request (its body is not valid
	// base64) is answered by the adapter with a 400 problem.
	bad := edit(t, event, func(e map[string]any) { e["isBase64Encoded"], e["body"] = true, "%%% not base64" })
	resp := mustHTTP(t, ping, bad)
	if b := lambdatest.JSONBody(t, resp); resp.StatusCode != 400 || lambdatest.Header(resp, "Content-Type") != "application/problem+json" ||
		b["status"] != float64(400) || b["title"] != "Bad Request" {
		t.Errorf("invalid base64 body: %d %v %v, want a 400 problem", resp.StatusCode, resp.Headers, b)
	}
	pingOK("invalid base64")
}

func TestPruneDeletesExpiredWindowsAndOldAuditRows(t *testing.T) {
	t.Parallel()
	dbPath := filepath.Join(t.TempDir(), "ratelimit.db")
	// events/prune.json is scheduled at 2026-01-01T00:05:00Z. The clock is
	// later, and prune uses the earlier of the two, so that time counts.
	at := time.Date(2026, 1, 1, 0, 5, 0, 0, time.UTC)
	minute := limiter.Policy{Name: "ping", Limit: 3, Window: time.Minute}
	daily := limiter.Policy{Name: "daily", Limit: 3, Window: 24 * time.Hour}
	seed := []struct {
		key    string
		policy limiter.Policy
		ago    time.Duration
	}{
		// In the order of time, as audit rows are appended. With a 60 s
		// window a row expires when window_start + 120 s < 00:05:00; audit
		// rows go when made before 00:00:00 (AUDIT_RETENTION=5m).
		{"old", minute, 10 * time.Minute},                      // window 23:55: deleted; audit deleted
		{"old-daily", daily, 10 * time.Minute},                 // window 2025-12-31, a day long: kept; audit deleted
		{"before-cutoff", minute, 5*time.Minute + time.Second}, // window 23:59: deleted; audit 23:59:59 deleted
		{"at-cutoff", minute, 5 * time.Minute},                 // window 00:00: deleted; audit 00:00:00 kept
		{"ended", minute, 3 * time.Minute},                     // window 00:02, ended 00:03: deleted
		{"edge", minute, 2 * time.Minute},                      // window 00:03 ended exactly one window ago: kept
		{"previous", minute, time.Minute},                      // kept
		{"current", minute, 0},                                 // kept
	}
	s := sqlitetest.Open(t, sqlite.Config{Path: dbPath})
	for _, r := range seed {
		d, err := s.Allow(context.Background(), storetest.One(r.policy, r.key, at.Add(-r.ago), "GET /ping", "seed"))
		if err != nil || !d.Allowed {
			t.Fatalf("seed %s: %+v, %v", r.key, d, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	prune := startEmulator(t, "prune", "DB_PATH="+dbPath, "WINDOW_SECONDS=60", "AUDIT_RETENTION=5m")
	run := func() map[string]any {
		t.Helper()
		status, body, err := prune.invoke(lambdatest.Event(t, "prune.json"))
		if err != nil {
			t.Fatal(err)
		}
		var res map[string]any
		if err := json.Unmarshal(body, &res); err != nil || status != 200 {
			t.Fatalf("prune: %d %s, want its result as JSON", status, body)
		}
		return res
	}
	want := map[string]any{
		"windows_deleted": float64(4),
		"buckets_deleted": float64(0),
		"audit_deleted":   float64(3),
		"now":             "2026-01-01T00:05:00Z",
		"audit_before":    "2026-01-01T00:00:00Z",
	}
	if res := run(); !reflect.DeepEqual(res, want) {
		t.Errorf("prune result = %v\nwant %v", res, want)
	}

	db := sqlitetest.Inspect(t, dbPath)
	if got, want := queryStrings(t, db, `SELECT key FROM rate_limit_windows ORDER BY key`), []string{"current", "edge", "old-daily", "previous"}; !slices.Equal(got, want) {
		t.Errorf("windows left: %v, want %v", got, want)
	}
	if got, want := queryStrings(t, db, `SELECT key FROM api_calls ORDER BY id`), []string{"at-cutoff", "ended", "edge", "previous", "current"}; !slices.Equal(got, want) {
		t.Errorf("audit rows left: %v, want %v", got, want)
	}

	// A retry of the same scheduled event finds nothing more to delete.
	want["windows_deleted"], want["audit_deleted"] = float64(0), float64(0)
	if res := run(); !reflect.DeepEqual(res, want) {
		t.Errorf("second prune = %v\nwant %v", res, want)
	}
}

// TestExecutionEnvironmentsSharingOneFileCountExactly runs several ping
// functions as Lambda scales out: separate processes, each serving one
// invocation at a time, all on one database file.
func TestExecutionEnvironmentsSharingOneFileCountExactly(t *testing.T) {
	t.Parallel()
	const environments, limit, requests = 4, 25, 120
	dbPath := filepath.Join(t.TempDir(), "ratelimit.db")
	envs := make([]*emulator, environments)
	for i := range envs {
		envs[i] = startEmulator(t, "ping", "DB_PATH="+dbPath, "RATE_LIMIT="+strconv.Itoa(limit), "WINDOW_SECONDS="+longWindow)
	}
	event := withKey(t, lambdatest.Event(t, "ping.json"), "crowd")

	// Every request has its goroutine; each environment takes its share one
	// at a time (emulator.invoke serialises), and all environments run at
	// once, cold starts included.
	type result struct {
		status int
		count  float64 // of an allowed request
	}
	results := make([]result, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() {
			resp, err := envs[i%environments].invokeHTTP(event)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			results[i].status = resp.StatusCode
			if resp.StatusCode == 200 {
				var b map[string]any
				json.Unmarshal([]byte(resp.Body), &b)
				results[i].count, _ = b["count"].(float64)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	statuses := map[int]int{}
	var counts []float64
	for _, r := range results {
		statuses[r.status]++
		if r.status == 200 {
			counts = append(counts, r.count)
		}
	}
	if statuses[200] != limit || statuses[429] != requests-limit || len(statuses) != 2 {
		t.Errorf("statuses %v, want %d × 200 and %d × 429", statuses, limit, requests-limit)
	}
	// Each allowed request saw its own count: no two environments read the
	// same value.
	slices.Sort(counts)
	for i, c := range counts {
		if c != float64(i+1) {
			t.Errorf("allowed requests saw counts %v, want 1 to %d once each", counts, limit)
			break
		}
	}
	db := sqlitetest.Inspect(t, dbPath)
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM rate_limit_windows WHERE key = 'crowd'`); n != 1 {
		t.Errorf("%d window rows for the key, want 1", n)
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT sum(count) FROM rate_limit_windows WHERE key = 'crowd'`); n != requests {
		t.Errorf("stored count %d, want %d: every attempt counts", n, requests)
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls WHERE key = 'crowd'`); n != limit {
		t.Errorf("%d audit rows, want %d: one per allowed request", n, limit)
	}
}
