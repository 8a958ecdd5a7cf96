package dynamodb_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/dynamodb"
	"github.com/ft251/ratelimit/limiter/dynamodb/dynamotest"
)

var workerPolicy = limiter.Policy{Name: "ping", Limit: 20, Window: time.Hour}

// decidingWorker makes decisions over three keys as fast as it can against
// "endpoint table", and reports each one Allow returned on stdout.
func decidingWorker(arg string) {
	endpoint, table, _ := strings.Cut(arg, " ")
	s, err := dynamodb.Open(context.Background(), limiter.StoreConfig{Table: table, Endpoint: endpoint, BusyTimeout: 10 * time.Second}, dynamotest.Options()...)
	if err != nil {
		panic(err)
	}
	out := bufio.NewWriter(os.Stdout)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; ; i++ {
		key := fmt.Sprintf("k%d", rand.IntN(3))
		if _, err := s.Allow(context.Background(), limiter.One(workerPolicy, key, t0, "GET /ping", fmt.Sprint(os.Getpid(), "-", i))); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		fmt.Fprintln(out, key)
		out.Flush()
	}
}

// TestKillNineBetweenWrites kills processes that decide against one table,
// at random moments, between and during their requests: a decision is a
// transaction and then a read, or a failed transaction and then an update.
// Whatever the moment, every window ends with exactly min(count, limit)
// audit records, and no decision a process saw returned is missing.
func TestKillNineBetweenWrites(t *testing.T) {
	endpoint := dynamotest.Endpoint(t)
	table := dynamotest.CreateTable(t, endpoint)

	var mu sync.Mutex
	reported := map[string]int64{}
	total := 0
	var wg sync.WaitGroup
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "RATELIMIT_DYNAMODB_WORKER="+endpoint+" "+table)
		cmd.Stderr = os.Stderr
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				mu.Lock()
				reported[sc.Text()]++
				total++
				mu.Unlock()
			}
		})
		return cmd
	}
	progress := func() int {
		mu.Lock()
		defer mu.Unlock()
		return total
	}
	waitFor := func(n int) {
		deadline := time.Now().Add(60 * time.Second)
		for before := progress(); progress() < before+n; {
			if time.Now().After(deadline) {
				t.Fatalf("no progress: %d decisions reported", progress())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	procs := make([]*exec.Cmd, 3)
	for i := range procs {
		procs[i] = start()
	}
	const kills = 5
	for range kills {
		waitFor(10 + rand.IntN(20))
		i := rand.IntN(len(procs))
		procs[i].Process.Kill()
		procs[i].Wait()
		procs[i] = start()
		waitFor(10)
	}
	for _, p := range procs {
		p.Process.Kill()
		p.Wait()
	}
	wg.Wait()

	c := dynamotest.Client(t, endpoint)
	counts, audits := map[string]int64{}, map[string]int64{}
	for _, it := range scan(t, c, table) {
		pk := s(it["pk"])
		if k, ok := strings.CutPrefix(pk, "call#"); ok {
			audits[strings.Split(k, "#")[0]]++
		} else {
			counts[pk] = n(it["count"])
		}
	}
	var extra int64
	for k, got := range counts {
		if want := min(got, workerPolicy.Limit); audits[k] != want {
			t.Errorf("%s: count %d with %d audit records, want %d", k, got, audits[k], want)
		}
		if got < reported[k] {
			t.Errorf("%s: %d decisions reported, only %d stored", k, reported[k], got)
		}
		extra += got - reported[k]
	}
	t.Logf("%d decisions reported, %d more counted by processes killed before they could say so", progress(), extra)
	if extra > kills+int64(len(procs)) {
		t.Errorf("%d stored decisions nobody reported, more than one per killed process", extra)
	}
}
