package sqlite_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/internal/testproc"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// Roles of the hand-off tests.
const (
	// roleHandoffHolder decides one attempt, and holds its transaction,
	// before its COMMIT, until HANDOFF_WAITERS request files are there;
	// with HANDOFF_HOLD set, it then stops once it has decided them, still
	// before its COMMIT, and waits to be killed.
	roleHandoffHolder = "hand-off holder"
	// roleHandoffWaiter decides one attempt of HANDOFF_KEY and prints its
	// outcome (handoffResult).
	roleHandoffWaiter = "hand-off waiter"
)

// handoffPolicy is what the hand-off tests enforce.
var handoffPolicy = limiter.Policy{Name: "ping", Limit: 2, Window: time.Minute}

// handoffResult is what a hand-off waiter prints.
type handoffResult struct {
	Allowed   bool  `json:"allowed"`
	Count     int64 `json:"count"`
	Remaining int64 `json:"remaining"`
	HandedOff int64 `json:"handed_off"`
	// Own is how many transactions of its own the waiter committed
	// (Stats.Batches): 0 when a holder answered it.
	Own int64 `json:"own,omitempty"`
}

func handoffHolder(path string) {
	waiters, _ := strconv.Atoi(os.Getenv("HANDOFF_WAITERS"))
	hold := os.Getenv("HANDOFF_HOLD") != ""
	slow, _ := time.ParseDuration(os.Getenv("HANDOFF_SLOW"))
	var once atomic.Bool
	sqlite.SetCommitHook(func(string) error {
		if once.CompareAndSwap(false, true) {
			fmt.Println("holding")
			waitForRequests(path, waiters)
		}
		return nil
	})
	sqlite.SetServedHook(func(_ string, n int) {
		if hold {
			fmt.Println("served", n)
			select {}
		}
		time.Sleep(slow)
	})
	s, err := sqlite.Open(context.Background(), storeConfig(path))
	if err != nil {
		panic(err)
	}
	if _, err := s.Allow(context.Background(), storetest.One(handoffPolicy, "holder", t0, "GET /ping", "holder")); err != nil {
		panic(err)
	}
	fmt.Println("served", s.Stats().Served)
}

// waitForRequests waits until n requests are written beside the database
// at path, for 10 s at most.
func waitForRequests(path string, n int) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if sqlite.WaitingRequests(path) >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "%d requests did not come\n", n)
}

func handoffWaiter(path string) {
	cfg := storeConfig(path)
	if d, err := time.ParseDuration(os.Getenv("HANDOFF_BUSY")); err == nil {
		cfg.BusyTimeout = d
	}
	if d, err := time.ParseDuration(os.Getenv("HANDOFF_SLOW_READ")); err == nil {
		sqlite.SetOpenHook(func(stage, _ string) {
			if stage == "outcomes" {
				time.Sleep(d)
			}
		})
	}
	s, err := sqlite.Open(context.Background(), cfg)
	if err != nil {
		panic(err)
	}
	key := os.Getenv("HANDOFF_KEY")
	o, err := s.Allow(context.Background(), storetest.One(handoffPolicy, key, t0, "GET /ping", "req-"+key))
	if err != nil {
		panic(err)
	}
	d := o.Decisions[0]
	st := s.Stats()
	r := handoffResult{Allowed: o.Allowed, Count: d.Count, Remaining: d.Remaining, HandedOff: st.HandedOff}
	if os.Getenv("HANDOFF_SHOW_OWN") != "" {
		r.Own = st.Batches
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
}

// startRole starts role on path with env added, and returns it with its
// stdout.
func startRole(t *testing.T, role, path string, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := testproc.Command(role, path)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(out)
}

func line(t *testing.T, r *bufio.Reader, who string) string {
	t.Helper()
	s, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%s: %v (read %q)", who, err, s)
	}
	return strings.TrimSuffix(s, "\n")
}

// handoffScene makes a file where k2 has used its limit, starts a holder
// (with env), waits until it holds the lock, and starts a waiter for each
// of k0, k1 and k2, which find the lock taken.
func handoffScene(t *testing.T, env ...string) (path string, holder *exec.Cmd, holderOut *bufio.Reader, waiters []*bufio.Reader) {
	return handoffSceneWith(t, env, nil)
}

// handoffSceneWith is handoffScene with waiterEnv for the waiters.
func handoffSceneWith(t *testing.T, env, waiterEnv []string) (path string, holder *exec.Cmd, holderOut *bufio.Reader, waiters []*bufio.Reader) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "handoff.db")
	s := sqlitetest.Open(t, storeConfig(path))
	for range handoffPolicy.Limit {
		allow(t, s, handoffPolicy, "k2", t0)
	}
	s.Close()
	holder, holderOut = startRole(t, roleHandoffHolder, path, append(env, "HANDOFF_WAITERS=3")...)
	if got := line(t, holderOut, "holder"); got != "holding" {
		t.Fatalf("holder said %q", got)
	}
	for _, key := range []string{"k0", "k1", "k2"} {
		_, out := startRole(t, roleHandoffWaiter, path, append(waiterEnv, "HANDOFF_KEY="+key)...)
		waiters = append(waiters, out)
	}
	return path, holder, holderOut, waiters
}

// checkWaiters reads the three waiters' outcomes: k0 and k1 allowed, the
// first of their keys, k2 denied past its limit; each handed off handed,
// unless handed is below zero.
func checkWaiters(t *testing.T, waiters []*bufio.Reader, handed int64) {
	t.Helper()
	want := []handoffResult{
		{Allowed: true, Count: 1, Remaining: 1, HandedOff: handed},
		{Allowed: true, Count: 1, Remaining: 1, HandedOff: handed},
		{Allowed: false, Count: 3, Remaining: 0, HandedOff: handed},
	}
	for i, w := range waiters {
		var got handoffResult
		s := line(t, w, fmt.Sprintf("waiter k%d", i))
		if err := json.Unmarshal([]byte(s), &got); err == nil && handed < 0 {
			got.HandedOff = handed
		}
		if got != want[i] {
			t.Errorf("waiter k%d: %s, want %+v", i, s, want[i])
		}
	}
}

// checkFile checks the file's counts and audit records: holder counted
// holderCount times, k0 and k1 once each, k2 three times with its two
// audit records; and that no request is left in the request file.
func checkFile(t *testing.T, path string, holderCount int64) {
	t.Helper()
	db := sqlitetest.Inspect(t, path)
	defer db.Close()
	if ok := sqlitetest.QueryString(t, db, `PRAGMA integrity_check`); ok != "ok" {
		t.Errorf("integrity_check: %s", ok)
	}
	start := t0.Truncate(handoffPolicy.Window)
	for key, want := range map[string]int64{"holder": holderCount, "k0": 1, "k1": 1, "k2": 3} {
		if _, count := sqlitetest.Counter(t, db, key, start); count != want {
			t.Errorf("%s counted %d times, want %d", key, count, want)
		}
		if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls WHERE key = ?`, key); n != min(want, handoffPolicy.Limit) {
			t.Errorf("%s has %d audit records, want %d", key, n, min(want, handoffPolicy.Limit))
		}
	}
	if n := sqlite.WaitingRequests(path); n != 0 {
		t.Errorf("%d requests left behind", n)
	}
}

// TestAWaitingProcessIsDecidedByTheLocksHolder: three processes that find
// the lock held by a fourth hand it their attempts, and the holder decides
// them in its own transaction, with its own: each waiter is answered as if
// it had decided itself (two allowed, the first of their keys, one denied
// past its limit), with no transaction of its own; every attempt is counted
// once, each allowed one has its audit record, and no request is left. Without hand-offs each of the three would commit its own
// transaction after the holder's, one after another.
func TestAWaitingProcessIsDecidedByTheLocksHolder(t *testing.T) {
	t.Parallel()
	path, _, holderOut, waiters := handoffScene(t)
	if got := line(t, holderOut, "holder"); got != "served 3" {
		t.Errorf("holder: %q, want served 3", got)
	}
	checkWaiters(t, waiters, 1)
	checkFile(t, path, 1)
	db := sqlitetest.Inspect(t, path)
	defer db.Close()
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM handoffs`); n != 3 {
		t.Errorf("%d outcomes recorded, want 3", n)
	}
}

// TestAHolderKilledBeforeItsCommitLeavesItsWaitersToDecide: the holder
// decides the three waiters' attempts and is killed with SIGKILL before
// its COMMIT. Nothing it decided is in the file; the first waiter to take
// the lock next decides for itself, finding no outcome of its own, and
// for whichever of the others' requests it finds: the same answers as if
// the holder had never served them, each attempt counted once.
func TestAHolderKilledBeforeItsCommitLeavesItsWaitersToDecide(t *testing.T) {
	t.Parallel()
	path, holder, holderOut, waiters := handoffScene(t, "HANDOFF_HOLD=1")
	if got := line(t, holderOut, "holder"); got != "served 3" {
		t.Fatalf("holder: %q, want served 3", got)
	}
	holder.Process.Kill()
	holder.Wait()
	checkWaiters(t, waiters, -1)
	checkFile(t, path, 0)
	go io.Copy(io.Discard, holderOut)
}

// TestAWaiterWhoseWaitRunsOutGetsTheOutcomeCommittedForIt: the holder
// decides the three waiters' attempts and takes longer to commit than
// their 1 s budget. A waiter that gave up then would be told of an error
// for an attempt counted after all, and its client would retry it; each
// instead withdraws its request, waits for the holder's COMMIT, and is
// answered with the outcome committed for it.
func TestAWaiterWhoseWaitRunsOutGetsTheOutcomeCommittedForIt(t *testing.T) {
	t.Parallel()
	path, _, holderOut, waiters := handoffSceneWith(t, []string{"HANDOFF_SLOW=1500ms"}, []string{"HANDOFF_BUSY=1s"})
	if got := line(t, holderOut, "holder"); got != "served 3" {
		t.Errorf("holder: %q, want served 3", got)
	}
	checkWaiters(t, waiters, 1)
	checkFile(t, path, 1)
}

// TestAServedWaiterWhoseReadIsSlowIsAnsweredByIt: on slow storage reading
// the outcomes is several round trips. A waiter whose read takes longer
// than a fixed bound (here 300 ms, over the 100 ms it once was) still
// reads what the holder committed for it and is answered so, with no
// transaction of its own; cut off, every served waiter took the lock in
// turn to read its outcome there.
func TestAServedWaiterWhoseReadIsSlowIsAnsweredByIt(t *testing.T) {
	t.Parallel()
	path, _, holderOut, waiters := handoffSceneWith(t, nil, []string{"HANDOFF_SLOW_READ=300ms", "HANDOFF_SHOW_OWN=1"})
	if got := line(t, holderOut, "holder"); got != "served 3" {
		t.Errorf("holder: %q, want served 3", got)
	}
	want := []handoffResult{
		{Allowed: true, Count: 1, Remaining: 1, HandedOff: 1},
		{Allowed: true, Count: 1, Remaining: 1, HandedOff: 1},
		{Allowed: false, Count: 3, Remaining: 0, HandedOff: 1},
	}
	for i, w := range waiters {
		var got handoffResult
		s := line(t, w, fmt.Sprintf("waiter k%d", i))
		if err := json.Unmarshal([]byte(s), &got); err != nil || got != want[i] {
			t.Errorf("waiter k%d: %s, want %+v with no transaction of its own", i, s, want[i])
		}
	}
	checkFile(t, path, 1)
}
