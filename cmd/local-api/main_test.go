package main_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/dynamotest"
	"github.com/ft251/ratelimit/internal/testbin"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// TestMain shares one moto_server among the tests on DynamoDB, each on a
// table of its own.
func TestMain(m *testing.M) {
	dynamotest.Main(m)
}

// localAPI is the server's executable, built once for all the tests (and
// reused by the next go test while its sources are unchanged).
func localAPI(t *testing.T) string {
	t.Helper()
	return testbin.Build(t, testbin.Spec{Dir: ".", Pkg: "."})
}

// TestLocalServerEndToEnd builds and runs the README's first command as a
// new user would, with only the address and database moved into a temporary
// directory, then curls it.
func TestLocalServerEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The pings' audit rows are a second old at the next prune, which
	// deletes them and says so.
	runLocalServer(t, dir, true, "AUDIT_RETENTION=1s")
	if _, err := os.Stat(filepath.Join(dir, "data", "ratelimit.db")); err != nil {
		t.Errorf("default database not created: %v", err)
	}
}

// TestLocalServerOnDynamoDB runs it with STORE=dynamodb against moto_server.
func TestLocalServerOnDynamoDB(t *testing.T) {
	t.Parallel()
	endpoint := dynamotest.Endpoint(t)
	table := dynamotest.CreateTable(t, endpoint)
	dir := t.TempDir()
	runLocalServer(t, dir, false, append([]string{"STORE=dynamodb", "TABLE_NAME=" + table, "DYNAMODB_ENDPOINT=" + endpoint}, dynamotest.Env...)...)
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("a SQLite data directory was created for the DynamoDB store")
	}
}

// runLocalServer builds the server, starts it in dir with env added, and
// checks the README's session: 200, 200, 200, 429, then /status; and, when
// prunes, that its prune loop deletes something and logs it. (A prune that
// deletes nothing logs at debug, which the server does not print; the
// DynamoDB store's never deletes, as its items expire by TTL.)
func runLocalServer(t *testing.T, dir string, prunes bool, env ...string) {
	// The window is 30 days so that the four requests, which read the real
	// clock, all but surely fall in one window.
	addr, lines, cmd := startLocalServer(t, dir, append([]string{"WINDOW_SECONDS=2592000", "RATE_LIMIT="}, env...)...)
	defer cmd.Process.Kill()

	base := "http://" + addr
	for i, want := range []int{200, 200, 200, 429} {
		req, _ := http.NewRequest("GET", base+"/ping", nil)
		req.Header.Set("X-Client-Key", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("ping %d: %d %s, want %d", i+1, resp.StatusCode, body, want)
		}
		if resp.Header.Get("RateLimit-Policy") != `"ping";q=3;w=2592000` || resp.Header.Get("RateLimit") == "" {
			t.Errorf("ping %d: rate limit headers missing: %v", i+1, resp.Header)
		}
		if want == 429 && (resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/problem+json") {
			t.Errorf("429 without Retry-After or problem+json: %v", resp.Header)
		}
	}
	resp, err := http.Get(base + "/status?key=alice")
	if err != nil {
		t.Fatal(err)
	}
	var status map[string]any
	json.NewDecoder(resp.Body).Decode(&status)
	resp.Body.Close()
	if status["count"] != float64(4) || status["remaining"] != float64(0) {
		t.Errorf("status = %v, want count 4, remaining 0", status)
	}
	// A GET announcing a body it never finishes sending still gets its
	// answer, at once.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, "GET /ping HTTP/1.1\r\nHost: x\r\nX-Client-Key: slow\r\nContent-Length: 10\r\n\r\nabc")
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 200") {
		t.Errorf("GET with an unfinished body: %q, %v; want an answer", line, err)
	}
	conn.Close()

	if prunes {
		waitFor(t, lines, `"level":"INFO","msg":"prune"`)
	}

	cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, lines, `"msg":"shutting down"`)
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v, want a clean exit", err)
	}
}

// startLocalServer starts the server (localAPI) in dir with env added,
// and returns its address and its output lines once it listens.
func startLocalServer(t *testing.T, dir string, env ...string) (string, <-chan string, *exec.Cmd) {
	t.Helper()
	bin := localAPI(t)
	cmd := exec.Command(bin)
	// DB_PATH is left unset: the default ./data/ratelimit.db is created
	// relative to the working directory. Port 0: the server binds a port
	// the kernel picks and names it in its "listening" line, so that tests
	// running side by side never race for one.
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "ADDR=127.0.0.1:0", "DB_PATH=", "PRUNE_INTERVAL=1s", "POLICIES=", "SHADOW=", "METRICS="), env...)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var listening struct{ Addr string }
	if err := json.Unmarshal([]byte(waitFor(t, lines, `"msg":"listening"`)), &listening); err != nil || !strings.HasPrefix(listening.Addr, "http://") {
		t.Fatalf("the listening line names no address: %+v, %v", listening, err)
	}
	return strings.TrimPrefix(listening.Addr, "http://"), lines, cmd
}

// waitFor reads lines until one contains substr, and returns it.
func waitFor(t *testing.T, lines <-chan string, substr string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("server exited before logging %s", substr)
			}
			if strings.Contains(line, substr) {
				return line
			}
		case <-timeout:
			t.Fatalf("no log line with %s", substr)
		}
	}
}

// TestLocalServerWithPolicies runs the server with two policies on /ping, a
// fixed and a sliding one, and EMF metrics on stdout, as docs/metrics.md shows.
func TestLocalServerWithPolicies(t *testing.T) {
	t.Parallel()
	// Windows of 30 days keep the real clock away from their edges.
	policies := `[{"name":"ping","limit":3,"window":"30d"},{"name":"burst","limit":2,"window":"30d","algorithm":"sliding"}]`
	addr, lines, cmd := startLocalServer(t, t.TempDir(), "POLICIES="+policies, "METRICS=emf", "METRICS_NAMESPACE=RateLimit/local")
	defer cmd.Process.Kill()

	var last *http.Response
	var lastBody []byte
	for i, want := range []int{200, 200, 429} {
		req, _ := http.NewRequest("GET", "http://"+addr+"/ping", nil)
		req.Header.Set("X-Client-Key", "alice")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("ping %d: %d %s, want %d", i+1, resp.StatusCode, body, want)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != `"ping";q=3;w=2592000, "burst";q=2;w=2592000` {
			t.Errorf("ping %d: RateLimit-Policy %q does not list both policies", i+1, got)
		}
		last, lastBody = resp, body
	}
	var problem struct {
		Policies []struct {
			Name       string `json:"name"`
			Algorithm  string `json:"algorithm"`
			RetryAfter int64  `json:"retry_after"`
			Denied     bool   `json:"denied"`
		} `json:"policies"`
	}
	if err := json.Unmarshal(lastBody, &problem); err != nil {
		t.Fatal(err)
	}
	// burst denied the 3rd; ping allowed it, its last, and holds the next
	// one back too. Retry-After is the longer wait.
	ps := problem.Policies
	if len(ps) != 2 || ps[0].Name != "ping" || ps[0].Denied || ps[1].Name != "burst" || !ps[1].Denied || ps[1].Algorithm != "sliding" {
		t.Errorf("429 names %+v, want ping (not denied, used up) and burst (sliding, denied)", ps)
	}
	ra, err := strconv.ParseInt(last.Header.Get("Retry-After"), 10, 64)
	if len(ps) == 2 && (err != nil || ra != max(ps[0].RetryAfter, ps[1].RetryAfter)) {
		t.Errorf("Retry-After %q, want the longer of the waits in the body, %+v", last.Header.Get("Retry-After"), ps)
	}

	// Two policies x three requests: six EMF lines, all valid.
	emf := 0
	timeout := time.After(10 * time.Second)
	for emf < 6 {
		select {
		case line := <-lines:
			if !strings.Contains(line, `"_aws"`) {
				continue
			}
			if err := metrics.Validate([]byte(line)); err != nil {
				t.Fatalf("EMF line invalid: %v\n%s", err, line)
			}
			if !strings.Contains(line, `"Namespace":"RateLimit/local"`) {
				t.Errorf("EMF line not in the configured namespace: %s", line)
			}
			emf++
		case <-timeout:
			t.Fatalf("%d EMF lines on stdout, want 6", emf)
		}
	}
}

// TestCheckSaysWhetherPoliciesAreGood runs -check, docs/policies.md's way to try
// a POLICIES value before deploying it.
func TestCheckSaysWhetherPoliciesAreGood(t *testing.T) {
	t.Parallel()
	bin := localAPI(t)
	run := func(policies string, env ...string) (string, int) {
		cmd := exec.Command(bin, "-check")
		// Only the variables given: the whole configuration it prints is
		// then known.
		cmd.Env = append([]string{"POLICIES=" + policies}, env...)
		out, _ := cmd.CombinedOutput()
		// Whether the default address is in use is this machine's (a
		// local server of the reader's may listen there), not the
		// configuration's.
		return strings.Replace(string(out), "127.0.0.1:3000 (in use now: the server could not listen there until it is free)", "127.0.0.1:3000", 1), cmd.ProcessState.ExitCode()
	}
	out, code := run(`[{"name":"ping","limit":3,"window":"60s"},{"name":"daily","limit":1000,"window":"1d","algorithm":"sliding","key":"source-ip","shadow":true}]`)
	if code != 0 || out != "store: sqlite, ./data/ratelimit.db, journal DELETE, shards 1\n"+
		"busy timeout: 3s\nfail mode: closed\nreject cache: off\naudit retention: forever\nmetrics: off\n"+
		"listen: 127.0.0.1:3000\nprune every: 1m0s\nadmin routes: off\n"+
		"gc target: GOGC=400 (the server's own; GOGC sets another)\n"+
		"policies:\n"+
		"  ping: 3 per 1m0s, fixed window, key header, routes [/ping]\n"+
		"  daily: 1000 per 24h0m0s, sliding window, key source-ip, routes [/ping] shadow\n"+
		"GET /ping: counted under ping, daily\n"+
		"POST /check: every check must name its \"policies\"\n"+
		"The Lambda functions would accept it.\n" {
		t.Errorf("good policies: exit %d\n%s", code, out)
	}
	// A policy for routes of another service, and none for /ping: said.
	out, code = run(`[{"name":"orders","limit":5,"window":"60s","routes":["GET /orders/{id}"]},{"name":"api","limit":9,"window":"60s","routes":["POST /check"]}]`)
	for _, want := range []string{
		`GET /ping: no policy counts it; it answers 200 {"counted": false}`,
		`POST /check: without "policies", checked under api`,
		"note: orders counts none of this service's routes (routes [GET /orders/{id}])",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("policies for other routes: exit %d, want it to say %q:\n%s", code, want, out)
		}
	}
	out, code = run(`[{"name":"ping","limit":0,"window":"60s"},{"name":"ping","limit":1,"window":"31d"}]`)
	if code != 2 || !strings.Contains(out, "limit 0 is not from 1 to 999999999999999") || !strings.Contains(out, `"ping" is named twice`) || !strings.Contains(out, "31d") {
		t.Errorf("bad policies: exit %d, want 2 and every problem listed:\n%s", code, out)
	}
	// WAL is good for the local server, which is one host; the functions,
	// each a host of its own on EFS, refuse it, and -check says so.
	if out, code = run("", "JOURNAL_MODE=WAL"); code != 0 || !strings.Contains(out, "journal WAL, shards 1\n") ||
		!strings.Contains(out, "The Lambda functions would refuse it:") || !strings.Contains(out, "WAL is unsafe on EFS") {
		t.Errorf("JOURNAL_MODE=WAL: exit %d, want 0, and that the functions would refuse it\n%s", code, out)
	}
	// Shards: -check names the count; WAL with several is refused, since
	// it would commit a request counted in two files atomically per file
	// only.
	if out, code = run("", "SQLITE_SHARDS=16"); code != 0 || !strings.Contains(out, "journal DELETE, shards 16\n") {
		t.Errorf("SQLITE_SHARDS=16: exit %d\n%s", code, out)
	}
	if out, code = run("", "SQLITE_SHARDS=4", "JOURNAL_MODE=WAL"); code != 2 || !strings.Contains(out, "SQLITE_SHARDS: WAL") {
		t.Errorf("SQLITE_SHARDS=4 with WAL: exit %d, want 2 and why\n%s", code, out)
	}
	if out, code = run(`[{"name":"a","limit":1,"window":"1s"}]`, "RATE_LIMIT=5"); code != 0 || !strings.Contains(out, "RATE_LIMIT and WINDOW_SECONDS, which are ignored") {
		t.Errorf("POLICIES with RATE_LIMIT: exit %d, want 0 and a note that RATE_LIMIT is ignored\n%s", code, out)
	}
}
