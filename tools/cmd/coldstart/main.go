// Command coldstart measures cold starts on a new database file: it starts
// -procs processes at once (Lambda execution environments scaling out
// together), each of which opens a store on one file that does not exist
// yet, as a function's init does (Open, then Ready: create the file, migrate
// the schema, record the layout), and makes its first decision; and it
// reports, for each process, the time from the moment they were all started
// to its first decision. From the repository root:
//
//	go -C tools run ./cmd/coldstart -dir /mnt/efsmodel -procs 1,16 -runs 5
//
// Point -dir at a mount of tools/cmd/latencyfs to see it on a model of EFS.
// Each run uses a fresh file in -dir (removed afterwards); with -migrated,
// one that a process of its own has created and migrated first, to
// measure what a file that needs no migration costs. Per process count
// it prints every run's first decisions in order, and the median over the
// runs of the first, the median and the last process's. A process that
// fails (its wait for the lock ran past -busy, say) prints its error and
// is counted; the medians are over the runs in which none failed.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

var verbose *bool

func main() {
	dir := flag.String("dir", os.TempDir(), "directory for the new database files")
	procs := flag.String("procs", "1,16", "comma-separated process counts")
	runs := flag.Int("runs", 5, "runs per process count, each on a new file")
	shards := flag.Int("shards", 1, "SQLITE_SHARDS")
	journal := flag.String("journal", "DELETE", "JOURNAL_MODE")
	busy := flag.Duration("busy", sqlite.DefaultBusyTimeout, "BUSY_TIMEOUT")
	migrated := flag.Bool("migrated", false, "create and migrate each file first, in a process of its own, so that the processes measured find it ready: the floor of a new file's cold starts")
	verbose = flag.Bool("v", false, "print each process's ready and decided times and lock waits")
	child := flag.String("child", "", "internal: open the store at this path, decide once, and report")
	every := flag.Bool("every-shard", false, "internal: the child also opens every shard after its decision (the -migrated run's first process, so that every file exists)")
	flag.Parse()
	cfg := sqlite.Config{Shards: *shards, JournalMode: *journal, BusyTimeout: *busy}
	if *child != "" {
		cfg.Path = *child
		if err := decideOnce(cfg, *every); err != nil {
			fmt.Fprintln(os.Stderr, "coldstart:", err)
			os.Exit(1)
		}
		return
	}
	for _, p := range strings.Split(*procs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-procs: %q is not a positive number", p))
		}
		var firsts, medians, lasts []time.Duration
		failed := 0
		for r := range *runs {
			path := filepath.Join(*dir, fmt.Sprintf("coldstart-%d-%d-%d.db", os.Getpid(), n, r))
			flags := []string{"-shards", strconv.Itoa(*shards), "-journal", *journal, "-busy", busy.String()}
			if *migrated {
				if _, fails, err := start(1, path, append(flags, "-every-shard")...); err != nil || fails > 0 {
					fatal(fmt.Errorf("could not migrate %s first: %v", path, err))
				}
			}
			times, fails, err := start(n, path, flags...)
			remove(path, *shards)
			if err != nil {
				fatal(err)
			}
			failed += fails
			fmt.Printf("procs=%-2d run=%d first decisions: %s", n, r+1, durations(times))
			if fails > 0 {
				fmt.Printf(" (%d failed)", fails)
			}
			fmt.Println()
			if len(times) < n {
				continue // a run with failures has no last decision
			}
			firsts, medians, lasts = append(firsts, times[0]), append(medians, times[len(times)/2]), append(lasts, times[len(times)-1])
		}
		if len(lasts) == 0 {
			fmt.Printf("procs=%-2d no run without failures; %d processes of %d failed\n", n, failed, n**runs)
			continue
		}
		fmt.Printf("procs=%-2d median of %d runs without failures: first %v, median %v, last %v; %d processes of %d failed\n", n, len(lasts),
			median(firsts).Round(100*time.Microsecond), median(medians).Round(100*time.Microsecond), median(lasts).Round(100*time.Microsecond), failed, n**runs)
	}
}

// start starts n children on path, with flags, at once and returns the
// time from then to the first decision of each that made one, in order,
// and how many failed (their errors go to stderr).
func start(n int, path string, flags ...string) ([]time.Duration, int, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, 0, err
	}
	args := append(flags, "-child", path)
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bufio.Scanner, n)
	for i := range cmds {
		cmds[i] = exec.Command(self, args...)
		cmds[i].Stderr = os.Stderr
		out, err := cmds[i].StdoutPipe()
		if err != nil {
			return nil, 0, err
		}
		outs[i] = bufio.NewScanner(out)
	}
	began := time.Now()
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			return nil, 0, err
		}
	}
	var times []time.Duration
	var bad error
	fails := 0
	for i, c := range cmds {
		if outs[i].Scan() {
			var at, ready, retries, probes, handed, served int64
			if _, err := fmt.Sscan(outs[i].Text(), &at, &ready, &retries, &probes, &handed, &served); err != nil {
				bad = errors.Join(bad, fmt.Errorf("child %d said %q", i, outs[i].Text()))
			}
			times = append(times, time.Unix(0, at).Sub(began))
			if *verbose {
				fmt.Printf("  ready %v decided %v retries %d probes %d handed off %d served %d\n", time.Unix(0, ready).Sub(began).Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond), retries, probes, handed, served)
			}
		}
		if err := c.Wait(); err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				bad = errors.Join(bad, fmt.Errorf("child %d: %w", i, err))
			}
			fails++
		}
	}
	slices.Sort(times)
	return times, fails, bad
}

// decideOnce is a child: open the store as a function's init does, decide
// one attempt, and print when the decision came back, in Unix nanoseconds.
// With every, it then opens every shard (a read of a key of each), so that
// the processes measured after it find every file made and migrated: a
// cold start opens shard 0 and its key's shard only.
func decideOnce(cfg sqlite.Config, every bool) error {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Ready(ctx); err != nil {
		return err
	}
	ready := time.Now()
	p := limiter.Policy{Name: "ping", Limit: 1000, Window: time.Minute}
	key := "c" + strconv.Itoa(os.Getpid())
	a := limiter.Attempt{Charges: []limiter.Charge{{Policy: p, Key: key}}, Now: time.Now(), Route: "GET /ping", RequestID: key}
	if _, err := s.Allow(ctx, a); err != nil {
		return err
	}
	st := s.Stats()
	fmt.Println(time.Now().UnixNano(), ready.UnixNano(), st.BusyRetries, st.Probes, st.HandedOff, st.Served)
	if every {
		for i, seen := 0, map[int]bool{}; len(seen) < max(cfg.Shards, 1); i++ {
			k := fmt.Sprint("open-", i)
			if n := sqlite.ShardOf(k, max(cfg.Shards, 1)); !seen[n] {
				seen[n] = true
				if _, err := s.Usage(ctx, p, k, time.Now()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// remove deletes a run's files.
func remove(path string, shards int) {
	for i := range max(shards, 1) {
		p := sqlite.ShardPath(path, i)
		for _, suffix := range []string{"", "-journal", "-wait", "-wal", "-shm", "-handoff"} {
			os.Remove(p + suffix)
		}
	}
}

func durations(ds []time.Duration) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Round(100 * time.Microsecond).String()
	}
	return strings.Join(s, " ")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "coldstart:", err)
	os.Exit(1)
}
