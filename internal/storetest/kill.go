package storetest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// The crash test every store runs: worker processes decide as fast as they
// can on one store, and are killed with SIGKILL at random moments, most
// likely inside a decision (that is where a worker spends its time). A
// store's test starts the workers (its test binary again, see
// internal/testproc), runs Kill, reads what the store holds, and
// calls Killed.Check.

// Work is a worker's loop: it decides attempts under p at now, each for one
// of keys keys ("k0", "k1", ...) picked at random, as fast as s answers,
// and prints the key of each one that Allow returned (so committed) on a
// line of stdout. It never returns: a failed decision exits the process
// with status 1.
func Work(s limiter.Store, p limiter.Policy, keys int, now time.Time) {
	WorkConcurrently(s, []limiter.Policy{p}, keys, 1, now)
}

// WorkConcurrently is Work with several goroutines deciding at once, as a
// process serving several requests does (a store may then decide them
// together), each attempt checked under every one of policies: under the
// first for its key, under each other for its key + "/" + the policy's name,
// as a policy with another key source (an address) would. The first
// policy's count decides which attempts are allowed when the others' limits
// are out of reach.
func WorkConcurrently(s limiter.Store, policies []limiter.Policy, keys, goroutines int, now time.Time) {
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	for g := range goroutines {
		go func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("k%d", rand.IntN(keys))
				a := limiter.Attempt{Now: now, Route: "GET /ping", RequestID: fmt.Sprint(os.Getpid(), "-", g, "-", i)}
				for i, p := range policies {
					k := key
					if i > 0 {
						k += "/" + p.Name
					}
					a.Charges = append(a.Charges, limiter.Charge{Policy: p, Key: k})
				}
				// The request id is unique across workers, as API Gateway's is.
				if _, err := s.Allow(context.Background(), a); err != nil {
					fmt.Fprintln(os.Stderr, "worker:", err)
					os.Exit(1)
				}
				mu.Lock()
				fmt.Fprintln(out, key)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	select {}
}

// Kills says how Kill runs its workers.
type Kills struct {
	// Procs workers run at a time; Kills of them are killed, one after
	// another, each replaced by a new one.
	Procs, Kills int
	// Before each kill, Gap to 3*Gap more decisions are reported, so that
	// the kill lands at a random moment; after it, Gap more, so that the
	// survivors and the newcomer are seen to carry on.
	Gap int
	// Timeout bounds each wait for those decisions.
	Timeout time.Duration
	// InFlight is how many decisions a worker may have in flight at once
	// (its goroutines, see WorkConcurrently); zero means one. Each may
	// have committed unreported when the worker is killed.
	InFlight int
}

// Killed is what a Kill run's workers reported.
type Killed struct {
	Plan Kills
	// Reported is how many decisions each key had reported committed.
	Reported map[string]int64
	// Total is all of them.
	Total int
}

// Kill starts k.Procs workers with start, which returns a command not yet
// started (its stdout is Kill's to read), kills and replaces k.Kills of
// them at random moments, then kills them all, and returns what they
// reported.
func Kill(t *testing.T, k Kills, start func() *exec.Cmd) Killed {
	t.Helper()
	w := &workers{t: t, start: start, res: Killed{Plan: k, Reported: map[string]int64{}}}
	procs := make([]*exec.Cmd, k.Procs)
	for i := range procs {
		procs[i] = w.launch()
	}
	// The last kills, on a failure too: no worker outlives the test. They
	// are counted in what is returned, after them.
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
		w.wg.Wait()
	}()
	for range k.Kills {
		w.waitForProgress(k.Gap+rand.IntN(2*k.Gap), k.Timeout)
		i := rand.IntN(len(procs))
		procs[i].Process.Kill()
		procs[i].Wait()
		procs[i] = w.launch()
		w.waitForProgress(k.Gap, k.Timeout)
	}
	return w.result()
}

// workers are the worker processes of a Kill and what they reported.
type workers struct {
	t     *testing.T
	start func() *exec.Cmd
	wg    sync.WaitGroup
	mu    sync.Mutex
	res   Killed
}

// launch starts a worker and reads what it reports until it dies.
func (w *workers) launch() *exec.Cmd {
	w.t.Helper()
	cmd := w.start()
	out, err := cmd.StdoutPipe()
	if err != nil {
		w.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	w.wg.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.res.Reported[sc.Text()]++
			w.res.Total++
			w.mu.Unlock()
		}
	})
	return cmd
}

func (w *workers) progress() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.res.Total
}

// waitForProgress waits until the workers report n more decisions.
func (w *workers) waitForProgress(n int, timeout time.Duration) {
	w.t.Helper()
	deadline := time.Now().Add(timeout)
	for before := w.progress(); w.progress() < before+n; {
		if time.Now().After(deadline) {
			w.t.Fatalf("no progress: %d decisions reported", w.progress())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *workers) result() Killed {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.res
}

// Window is what a store holds for one key's window after a Kill run.
type Window struct {
	Count int64 // the counter
	Audit int64 // audit records
}

// Check charges the store's windows, by key, against what the workers
// reported, which all decided under one policy of the given limit: every
// window has exactly min(count, limit) audit records (a decision commits
// its increment and its audit record together, or neither); no decision a
// worker reported committed is missing; and at most one decision per
// killed process (the kills, and the last of every worker at the end) is
// stored without having been reported, committed just before its kill
// (one per decision it had in flight).
func (k Killed) Check(t *testing.T, limit int64, stored map[string]Window) {
	t.Helper()
	for key, w := range stored {
		if w.Audit != min(w.Count, limit) {
			t.Errorf("%s: count %d with %d audit records, want %d", key, w.Count, w.Audit, min(w.Count, limit))
		}
	}
	for key, n := range k.Reported {
		if stored[key].Count < n {
			t.Errorf("%s: %d decisions reported committed, only %d stored: a committed decision was lost", key, n, stored[key].Count)
		}
	}
	var extra int64
	for key, w := range stored {
		extra += w.Count - k.Reported[key]
	}
	t.Logf("%d decisions reported, %d more stored by processes killed before they could report them", k.Total, extra)
	if most := int64((k.Plan.Kills + k.Plan.Procs) * max(k.Plan.InFlight, 1)); extra > most {
		t.Errorf("%d stored decisions nobody reported, more than one per decision in flight in a killed process (%d)", extra, most)
	}
}
