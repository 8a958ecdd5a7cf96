package service_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/testproc"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// roleLockHolder is the role of this test binary as another process that
// holds the database lock (see holdLock and testproc).
const roleLockHolder = "lock holder"

func TestMain(m *testing.M) {
	testproc.Main(m, map[string]func(string){roleLockHolder: holdLock})
}

// holdLock takes an exclusive lock on the database, says so, and keeps it
// until its stdin closes.
func holdLock(path string) {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		panic(err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`BEGIN EXCLUSIVE`); err != nil {
		panic(err)
	}
	fmt.Println("locked")
	bufio.NewReader(os.Stdin).ReadString('\n')
}

// breakage is a way the database can fail under a running service, with the
// means to clear it.
type breakage struct {
	name  string
	apply func(t *testing.T, dir, path string) (clear func())
}

// chattr sets or clears the immutable attribute, which refuses writes even
// to root and even through descriptors opened before it was set: the
// nearest a test can get to a read-only mount without mounting one.
func chattr(t *testing.T, flag, path string) {
	t.Helper()
	if out, err := exec.Command("chattr", flag, path).CombinedOutput(); err != nil {
		msg := fmt.Sprintf("SKIPPED: chattr %s %s: %v %s (needs root on a file system with the immutable attribute)", flag, path, err, out)
		if os.Getenv("RATELIMIT_REQUIRE_TOOLS") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

var faults = []breakage{
	{"directory missing", func(t *testing.T, dir, path string) func() {
		moved := dir + ".away"
		if err := os.Rename(dir, moved); err != nil {
			t.Fatal(err)
		}
		return func() { os.Rename(moved, dir) }
	}},
	{"file read-only", func(t *testing.T, dir, path string) func() {
		chattr(t, "+i", path)
		return func() { chattr(t, "-i", path) }
	}},
	{"directory read-only", func(t *testing.T, dir, path string) func() {
		chattr(t, "+i", dir)
		return func() { chattr(t, "-i", dir) }
	}},
	{"locked by another process", func(t *testing.T, dir, path string) func() {
		cmd := testproc.Command(roleLockHolder, path)
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "locked\n" {
			cmd.Process.Kill()
			t.Fatalf("lock holder said %q, %v", line, err)
		}
		return func() {
			stdin.Close()
			cmd.Wait()
		}
	}},
}

// TestFaultsGetTheFailModesAnswerAndHeal breaks the database under a running
// handler in each way above, for each fail mode: /ping answers with the
// fail mode (503 problem, or 200 degraded), within the request's deadline,
// without a panic; once the fault clears the very next request is counted.
func TestFaultsGetTheFailModesAnswerAndHeal(t *testing.T) {
	for _, f := range faults {
		for _, mode := range []limiter.FailMode{limiter.FailClosed, limiter.FailOpen} {
			t.Run(f.name+"/"+string(mode), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "efs")
				os.Mkdir(dir, 0o755)
				path := filepath.Join(dir, "rl.db")
				s := sqlitetest.Open(t, sqlite.Config{Path: path, BusyTimeout: 200 * time.Millisecond})
				fx := newFixture(t, service.Options{Store: s, FailMode: mode})
				ping := func() *httptest.ResponseRecorder {
					// A deadline longer than the busy timeout: whichever ends
					// the wait, the answer comes back.
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/ping", nil)
					r.Header.Set("X-Client-Key", "alice")
					w := httptest.NewRecorder()
					fx.api.ServeHTTP(w, r)
					return w
				}
				if w := ping(); w.Code != 200 {
					t.Fatalf("before the fault: %d %s", w.Code, w.Body)
				}

				clear := f.apply(t, dir, path)
				w := ping()
				if mode == limiter.FailClosed {
					wantProblem(t, w, 503, service.TypeStoreUnavailable, "/ping")
					if w.Header().Get("Retry-After") == "" {
						t.Error("503 without Retry-After")
					}
				} else if body := decode(t, w); w.Code != 200 || body["degraded"] != true {
					t.Errorf("fail open: %d %v, want 200 degraded", w.Code, body)
				}
				clear()

				w = ping()
				if body := decode(t, w); w.Code != 200 || body["count"] != float64(2) {
					t.Errorf("after the fault cleared: %d %v, want 200 with count 2 (the failed attempt not counted)", w.Code, body)
				}
			})
		}
	}
}
