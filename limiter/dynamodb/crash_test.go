package dynamodb_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/dynamotest"
	"github.com/ft251/ratelimit/internal/longtest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/internal/testproc"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/dynamodb"
)

// roleWorker is the role of this test binary that TestKillNineBetweenWrites
// starts and kills (see testproc).
const roleWorker = "dynamodb worker"

var workerPolicy = limiter.Policy{Name: "ping", Limit: 20, Window: time.Hour}

// decidingWorker makes decisions over three keys against "endpoint table"
// until it is killed (storetest.Work).
func decidingWorker(arg string) {
	endpoint, table, _ := strings.Cut(arg, " ")
	s, err := dynamodb.Open(context.Background(), dynamodb.Config{Table: table, Endpoint: endpoint, BusyTimeout: 10 * time.Second}, dynamotest.Options()...)
	if err != nil {
		panic(err)
	}
	storetest.Work(s, workerPolicy, 3, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// TestKillNineBetweenWrites kills processes that decide against one table
// (five times, two without -tags longtests, see longtest) at random
// moments, between and during their requests: a decision is a read and
// then a transaction, and another when a race cancelled it.
// Whatever the moment, every window ends with exactly min(count, limit)
// audit records, and no decision a process saw returned is missing.
func TestKillNineBetweenWrites(t *testing.T) {
	t.Parallel()
	endpoint := dynamotest.Exclusive(t)
	table := dynamotest.CreateTable(t, endpoint)

	killed := storetest.Kill(t, storetest.Kills{Procs: 3, Kills: longtest.Rounds(t, 2, 5), Gap: 10, Timeout: 60 * time.Second}, func() *exec.Cmd {
		return testproc.Command(roleWorker, endpoint+" "+table)
	})

	c := dynamotest.Client(t, endpoint)
	stored := map[string]storetest.Window{}
	for _, it := range scan(t, c, table) {
		pk := s(it["pk"])
		if k, ok := strings.CutPrefix(pk, "call\x1f"); ok {
			k = strings.Split(k, "\x1f")[0]
			w := stored[k]
			w.Audit++
			stored[k] = w
		} else if k, ok := strings.CutPrefix(pk, "counter\x1f"); ok {
			w := stored[k]
			w.Count = n(it["count"])
			stored[k] = w
		} else {
			t.Errorf("item %q %q is neither a counter nor an audit record", pk, s(it["sk"]))
		}
	}
	killed.Check(t, workerPolicy.Limit, stored)
}
