//go:build linux

package functions_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/lambdatest"
	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// Lambda Managed Instances, in the emulator's mode for it: one execution
// environment runs up to AWS_LAMBDA_MAX_CONCURRENCY invocations at once
// (aws-lambda-go runs them on goroutines). In that mode the pinned emulator
// takes its bootstrap only from /var/task (and two other fixed places), so
// it runs in a mount namespace of its own with the test's directory bound
// there, which needs root; and it runs the bootstrap as uid 993, gid 990,
// so the database directory must be theirs.
const (
	managedUID, managedGID = 993, 990
)

// canManage says why this machine cannot run the managed-instances mode,
// or nil.
func canManage() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the managed-instances mode needs root (a mount namespace binding /var/task)")
	}
	for _, tool := range []string{"unshare", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("the managed-instances mode needs %s: %v", tool, err)
		}
	}
	if out, err := exec.Command("unshare", "-m", "true").CombinedOutput(); err != nil {
		return fmt.Errorf("unshare -m: %v %s", err, out)
	}
	return nil
}

// managedDir is a directory that uid 993 can reach: with the bootstrap in
// task/ and the database directory db/, which is theirs.
func managedDir(t testing.TB, bootstrap string) (task, db string) {
	t.Helper()
	base, err := os.MkdirTemp("", "managed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	task, db = filepath.Join(base, "task"), filepath.Join(base, "db")
	for _, d := range []string{task, db} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(task, "bootstrap"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return task, db
}

// handOver gives dir and everything in it to the user the emulator runs
// the bootstrap as.
func handOver(t testing.TB, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, managedUID, managedGID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// startManaged runs the bootstrap in task under the emulator in its
// managed-instances mode, with concurrency runtimes, and env added to the
// Lambda variables. It fails the test, or skips it without
// RATELIMIT_REQUIRE_TOOLS, where the machine cannot.
func startManaged(t testing.TB, task string, concurrency int, env ...string) *emulator {
	t.Helper()
	if err := canManage(); err != nil {
		if os.Getenv("RATELIMIT_REQUIRE_TOOLS") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err := os.MkdirAll("/var/task", 0o755); err != nil {
		t.Fatal(err)
	}
	mount, _ := exec.LookPath("mount")
	addrs := freeAddrs(t, 2)
	cmd := exec.Command("unshare", "-m", "sh", "-c",
		`"$0" --bind "$1" /var/task && exec "$2" --runtime-interface-emulator-address "$3" --runtime-api-address "$4"`,
		mount, task, bin.rie, addrs[0], addrs[1])
	cmd.Env = lambdaEnv("ping", append([]string{"AWS_LAMBDA_MAX_CONCURRENCY=" + strconv.Itoa(concurrency)}, env...)...)
	e := runEmulator(t, "ping", cmd, addrs[0])
	e.parallel = true
	return e
}

// invokeManaged invokes e, trying again while it answers that no runtime
// is idle (Runtime.Unavailable: the invocation reached no handler), as a
// caller of Lambda would.
func invokeManaged(e *emulator, event []byte) (int, []byte, error) {
	for tries := 0; ; tries++ {
		status, body, err := e.invoke(event)
		if err != nil || !strings.Contains(string(body), "Runtime.Unavailable") || tries == 1000 {
			return status, body, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// managedAnswer is what one invocation of the ping function answered.
type managedAnswer struct {
	key, id string
	status  int
	body    map[string]any
}

// driveManaged sends invocations of the ping function, for keys keys
// (tenant-0, ...) perKey each, from clients goroutines at once, each with
// its own API Gateway request id, and returns every answer.
func driveManaged(t *testing.T, e *emulator, keys, perKey, clients int) []managedAnswer {
	t.Helper()
	event := lambdatest.Event(t, "ping.json")
	answers := make([]managedAnswer, keys*perKey)
	next := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for i := range next {
				a := &answers[i]
				a.key, a.id = fmt.Sprint("tenant-", i%keys), fmt.Sprint("inv-", i)
				ev := edit(t, withKey(t, event, a.key), func(m map[string]any) {
					m["requestContext"].(map[string]any)["requestId"] = a.id
				})
				status, body, err := invokeManaged(e, ev)
				var resp struct {
					StatusCode int    `json:"statusCode"`
					Body       string `json:"body"`
				}
				if err != nil || status != 200 || json.Unmarshal(body, &resp) != nil || json.Unmarshal([]byte(resp.Body), &a.body) != nil {
					t.Errorf("invocation %d: %d %s %v", i, status, body, err)
					continue
				}
				a.status = resp.StatusCode
			}
		})
	}
	for i := range answers {
		next <- i
	}
	close(next)
	wg.Wait()
	return answers
}

// TestManagedInstanceBatchesConcurrentInvocations runs the ping function
// as one managed-instance execution environment at concurrency 16, and
// sends 240 invocations over four keys (limit 30) from 16 clients at
// once. Every invocation gets its own answer: its own key, and for the
// allowed ones a count no other got (1 to 30 for each key); each key has
// 30 × 200 and 30 × 429; the stored count is every attempt, the audit rows
// are exactly the allowed invocations, by request id; and the database
// saw fewer write transactions than decisions: they were batched.
func TestManagedInstanceBatchesConcurrentInvocations(t *testing.T) {
	t.Parallel()
	const concurrency, keys, perKey, limit = 16, 4, 60, 30
	task, dbDir := managedDir(t, bin.bootstrap["ping"])
	dbPath := filepath.Join(dbDir, "ratelimit.db")
	sqlitetest.Open(t, sqlite.Config{Path: dbPath}).Close() // the schema first, so commits below are decisions
	handOver(t, dbDir)
	before := sqlitetest.ChangeCounter(t, dbPath)
	e := startManaged(t, task, concurrency, "DB_PATH="+dbPath, "RATE_LIMIT="+strconv.Itoa(limit), "WINDOW_SECONDS="+longWindow)
	answers := driveManaged(t, e, keys, perKey, concurrency)
	if t.Failed() {
		t.FailNow()
	}
	commits := sqlitetest.ChangeCounter(t, dbPath) - before

	counts := map[string][]float64{}
	statuses := map[string]map[int]int{}
	var allowedIDs []string
	for _, a := range answers {
		if statuses[a.key] == nil {
			statuses[a.key] = map[int]int{}
		}
		statuses[a.key][a.status]++
		switch a.status {
		case 200:
			if a.body["key"] != a.key {
				t.Errorf("%s (key %s) was answered for key %v", a.id, a.key, a.body["key"])
			}
			counts[a.key] = append(counts[a.key], a.body["count"].(float64))
			allowedIDs = append(allowedIDs, a.id)
		case 429:
			if d, _ := a.body["detail"].(string); !strings.Contains(d, "'"+a.key+"'") {
				t.Errorf("%s (key %s) was denied as %q", a.id, a.key, d)
			}
		}
	}
	for k := range keys {
		key := fmt.Sprint("tenant-", k)
		if s := statuses[key]; s[200] != limit || s[429] != perKey-limit || len(s) != 2 {
			t.Errorf("%s: statuses %v, want %d × 200 and %d × 429", key, s, limit, perKey-limit)
		}
		slices.Sort(counts[key])
		for i, c := range counts[key] {
			if c != float64(i+1) {
				t.Errorf("%s: allowed invocations saw counts %v, want 1 to %d once each", key, counts[key], limit)
				break
			}
		}
	}
	db := sqlitetest.Inspect(t, dbPath)
	if n := sqlitetest.QueryInt(t, db, `SELECT sum(count) FROM rate_limit_windows`); n != keys*perKey {
		t.Errorf("stored counts add up to %d, want %d: every attempt", n, keys*perKey)
	}
	audited := queryStrings(t, db, `SELECT request_id FROM api_calls ORDER BY request_id`)
	slices.Sort(allowedIDs)
	if !slices.Equal(audited, allowedIDs) {
		t.Errorf("%d audit rows, want one per allowed invocation (%d), by request id", len(audited), len(allowedIDs))
	}
	t.Logf("%d decisions in %d write transactions (%.1f a transaction)", keys*perKey, commits, float64(keys*perKey)/float64(commits))
	if commits >= keys*perKey {
		t.Errorf("%d write transactions for %d decisions: none was batched", commits, keys*perKey)
	}
}
