package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter/sqlite"
)

// seen is what a client sees of a response.
type seen struct {
	status  int
	header  http.Header
	problem map[string]any
}

// sender sends one request to the shop, however it runs.
type sender func(t *testing.T, method, path, user string) seen

// clearOfEdges waits, if need be, until the minute (and the hour) have a
// few seconds left: the script's requests read the real clock, and must
// fall in one window.
func clearOfEdges() {
	now := time.Now()
	if left := now.Truncate(time.Minute).Add(time.Minute).Sub(now); left < 3*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
}

// script is what a user of the example sees, the same in every host:
// reads at 2 a minute, then a 429 with the limiter's headers; orders at a
// cost of 5 of 100 an hour, then a 429; a health check nobody limits.
func script(t *testing.T, send sender) {
	clearOfEdges()
	for i, want := range []int{200, 200, 429} {
		r := send(t, "GET", "/orders/"+strconv.Itoa(i+1), "")
		if r.status != want || r.header.Get("RateLimit-Policy") != `"reads";q=2;w=60` {
			t.Fatalf("read %d: %d %v, want %d with RateLimit-Policy", i+1, r.status, r.header, want)
		}
		if left := r.header.Get("X-RateLimit-Remaining"); left != strconv.Itoa(max(1-i, 0)) {
			t.Errorf("read %d: X-RateLimit-Remaining %q, want %d", i+1, left, max(1-i, 0))
		}
		if want == 429 {
			ra, err := strconv.Atoi(r.header.Get("Retry-After"))
			if err != nil || ra < 1 || ra > 60 || r.problem["type"] != "urn:ratelimit:problem:rate-limit-exceeded" || r.header.Get("Content-Type") != "application/problem+json" {
				t.Errorf("read 3: Retry-After %q, problem %v; want 1 to 60 s and the rate-limit-exceeded problem", r.header.Get("Retry-After"), r.problem)
			}
		}
	}
	for i := range 20 {
		if r := send(t, "POST", "/orders", "ann"); r.status != 201 || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(95-5*i) {
			t.Fatalf("order %d: %d, remaining %q; want 201, %d", i+1, r.status, r.header.Get("X-RateLimit-Remaining"), 95-5*i)
		}
	}
	if r := send(t, "POST", "/orders", "ann"); r.status != 429 || r.header.Get("RateLimit") == "" {
		t.Errorf("order 21: %d %v, want 429 with RateLimit", r.status, r.header)
	}
	if r := send(t, "POST", "/orders", "bob"); r.status != 201 {
		t.Errorf("another user's order: %d, want 201", r.status)
	}
	if r := send(t, "POST", "/orders", ""); r.status != 401 || r.problem["type"] != "urn:ratelimit:problem:unauthenticated" || r.header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("an order without a user: %d %v %v, want 401 unauthenticated with WWW-Authenticate", r.status, r.problem, r.header)
	}
	if r := send(t, "GET", "/health", ""); r.status != 200 || r.header.Get("RateLimit") != "" {
		t.Errorf("health: %d %v, want 200, unlimited", r.status, r.header)
	}
}

func read(status int, header http.Header, body []byte) seen {
	r := seen{status: status, header: header}
	if strings.HasPrefix(header.Get("Content-Type"), "application/problem+json") {
		json.Unmarshal(body, &r.problem)
	}
	return r
}

// newShop is the shop guarded as main guards it, on a file of its own,
// closed when t ends.
func newShop(t *testing.T) (*sqlite.Store, http.Handler) {
	t.Helper()
	store, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(t.TempDir(), "orders.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h, err := guard(store)
	if err != nil {
		t.Fatal(err)
	}
	return store, h
}

// TestExampleInHTTPTest drives the guarded handler as a unit.
func TestExampleInHTTPTest(t *testing.T) {
	_, h := newShop(t)
	script(t, func(t *testing.T, method, path, user string) seen {
		r := httptest.NewRequest(method, path, strings.NewReader("{}"))
		if user != "" {
			r.Header.Set("X-User", user)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return read(w.Code, w.Header(), w.Body.Bytes())
	})
}

// TestPruneKeepsTheFileFromGrowing: what the shop's requests leave in its
// file, counters and audit rows, is deleted once it can no longer matter:
// the counters a window after their window, the audit rows after
// auditRetention.
func TestPruneKeepsTheFileFromGrowing(t *testing.T) {
	store, h := newShop(t)
	clearOfEdges()
	for _, path := range []string{"/orders/1", "/orders"} {
		method := map[string]string{"/orders/1": "GET", "/orders": "POST"}[path]
		r := httptest.NewRequest(method, path, strings.NewReader("{}"))
		r.Header.Set("X-User", "ann")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 300 {
			t.Fatalf("%s %s: %d", method, path, w.Code)
		}
	}
	ctx := context.Background()
	now := time.Now()
	if got, err := prune(ctx, store, now); err != nil || got.Windows != 0 || got.Audit != 0 {
		t.Errorf("prune now: %+v, %v; want nothing deleted", got, err)
	}
	// Two hours on, both windows (a minute's, an hour's) are done with;
	// the audit rows are kept.
	if got, err := prune(ctx, store, now.Add(2*time.Hour)); err != nil || got.Windows != 2 || got.Audit != 0 {
		t.Errorf("prune two hours on: %+v, %v; want 2 windows deleted, the audit rows kept", got, err)
	}
	if got, err := prune(ctx, store, now.Add(auditRetention+time.Hour)); err != nil || got.Audit != 2 {
		t.Errorf("prune after the retention: %+v, %v; want the 2 audit rows deleted", got, err)
	} // Deployed, the schedule's function prunes the function's own file.
	tmpl, err := os.ReadFile("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(tmpl), "DB_PATH: /mnt/efs/orders.db\n"); n != 2 || !strings.Contains(string(tmpl), "CodeUri: ../../functions/prune/") {
		t.Errorf("template.yaml names the orders file %d times, want twice: the function's and its prune function's", n)
	}
}

// TestExampleAsALocalServer builds the example and runs it as a server
// process, as `go run ./examples/orders` does, and drives it over TCP.
func TestExampleAsALocalServer(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "orders")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "ADDR="+addr, "DB_PATH="+filepath.Join(dir, "data", "orders.db"), "AWS_LAMBDA_RUNTIME_API=")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "listening") {
	}
	script(t, func(t *testing.T, method, path, user string) seen {
		req, _ := http.NewRequest(method, "http://"+addr+path, strings.NewReader("{}"))
		if user != "" {
			req.Header.Set("X-User", user)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return read(resp.StatusCode, resp.Header, body)
	})
}
