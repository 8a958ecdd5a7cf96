package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/sqlitetest"
	"github.com/ft251/ratelimit/internal/storetest"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

// queue makes a batch form on s, every time: a connection of the test
// holds the write lock, a first decision starts its transaction and waits
// for the lock, and the others, started one at a time, queue behind it in
// that order. release lets go of the lock; results has each attempt's
// answer, in arrival order, once wait returns.
type queue struct {
	results []result
	wg      sync.WaitGroup
	release func()
}

type result struct {
	o   limiter.Outcome
	err error
}

func formQueue(t *testing.T, s *sqlite.Store, attempts []limiter.Attempt, ctxs []context.Context) *queue {
	t.Helper()
	conn, err := sqlitetest.Connect(t, s.Path()).Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), `BEGIN EXCLUSIVE`); err != nil {
		t.Fatal(err)
	}
	q := &queue{results: make([]result, len(attempts)), release: func() {
		conn.ExecContext(context.Background(), `ROLLBACK`)
		conn.Close()
	}}
	retries := s.Stats().BusyRetries
	for i, a := range attempts {
		ctx := context.Background()
		if ctxs != nil && ctxs[i] != nil {
			ctx = ctxs[i]
		}
		q.wg.Go(func() { q.results[i].o, q.results[i].err = s.Allow(ctx, a) })
		// The first is in its lock wait once it has retried; each other
		// is in the queue once the queue has grown.
		waitFor(t, func() bool {
			if i == 0 {
				return s.Stats().BusyRetries > retries
			}
			return sqlite.Queued(s, 0) == i
		})
	}
	return q
}

func (q *queue) wait() []result {
	q.release()
	q.wg.Wait()
	return q.results
}

// waitFor waits until cond holds; it bounds a hang, it times nothing.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
	}
}

func attempts(n int, key string) []limiter.Attempt {
	out := make([]limiter.Attempt, n)
	for i := range out {
		out[i] = storetest.One(ping, key, t0, "GET /ping", fmt.Sprint("r", i+1))
	}
	return out
}

// TestDecisionsThatArriveTogetherShareATransaction: six decisions on one
// key (limit 3) arrive while the first waits for the lock. The first is
// decided alone, as it started before the others came; the five behind it
// in one transaction. Each keeps its own outcome, computed in arrival
// order (counts 1 to 6, the first three allowed), and its own audit row.
func TestDecisionsThatArriveTogetherShareATransaction(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, storeConfig(""))
	q := formQueue(t, s, attempts(6, "k"), nil)
	for i, r := range q.wait() {
		if r.err != nil {
			t.Fatalf("decision %d: %v", i+1, r.err)
		}
		d := r.o.Decisions[0]
		if want := i < 3; d.Count != int64(i+1) || r.o.Allowed != want || d.Remaining != max(0, 3-int64(i+1)) {
			t.Errorf("decision %d: count %d, allowed %v, remaining %d; want count %d, allowed %v", i+1, d.Count, r.o.Allowed, d.Remaining, i+1, want)
		}
	}
	st := s.Stats()
	if st.Batches != 2 || st.Batched != 6 || st.LargestBatch != 5 {
		t.Errorf("stats %+v; want 2 batches of 6 decisions, the largest 5", st)
	}
	db := sqlitetest.Inspect(t, s.Path())
	if n := sqlitetest.QueryInt(t, db, `SELECT count FROM rate_limit_windows WHERE key = 'k'`); n != 6 {
		t.Errorf("stored count %d, want 6", n)
	}
	if got := queryColumn(t, db, `SELECT request_id FROM api_calls ORDER BY id`); !slices.Equal(got, []string{"r1", "r2", "r3"}) {
		t.Errorf("audit rows %v, want r1, r2, r3: the allowed ones, in arrival order", got)
	}
}

// TestABatchOverSeveralKeysDecidesEachAsIfAlone: a batch mixes keys, GCRA
// and costs; every attempt's outcome is what it would be decided alone in
// that order.
func TestABatchOverSeveralKeysDecidesEachAsIfAlone(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, storeConfig(""))
	gcra := limiter.Policy{Name: "g", Limit: 1, Window: time.Second, Algorithm: limiter.GCRA, Burst: 2, Namespace: "g"}
	as := []limiter.Attempt{
		storetest.One(ping, "a", t0, "", "1"),
		storetest.One(gcra, "a", t0, "", "2"),
		{Charges: []limiter.Charge{{Policy: ping, Key: "b", Cost: 2}}, Now: t0, RequestID: "3"},
		storetest.One(gcra, "a", t0, "", "4"),
		storetest.One(gcra, "a", t0, "", "5"),                                                   // the burst of 2 is spent
		{Charges: []limiter.Charge{{Policy: ping, Key: "b", Cost: 2}}, Now: t0, RequestID: "6"}, // 4 > 3
		storetest.One(ping, "a", t0, "", "7"),
	}
	want := []bool{true, true, true, true, false, false, true}
	q := formQueue(t, s, as, nil)
	for i, r := range q.wait() {
		if r.err != nil || r.o.Allowed != want[i] {
			t.Errorf("attempt %d: allowed %v, %v; want %v", i+1, r.o.Allowed, r.err, want[i])
		}
	}
	db := sqlitetest.Inspect(t, s.Path())
	if got := queryColumn(t, db, `SELECT request_id FROM api_calls ORDER BY id`); !slices.Equal(got, []string{"1", "2", "3", "4", "7"}) {
		t.Errorf("audit rows %v, want one per allowed attempt, in order", got)
	}
	if n := sqlitetest.QueryInt(t, db, `SELECT count FROM rate_limit_windows WHERE key = 'b'`); n != 4 {
		t.Errorf("b counted %d, want 4 (two attempts of cost 2)", n)
	}
}

// TestAFailedBatchAnswersEveryMemberAndCountsNone: the commit of the
// batch of five fails; each of the five gets the error, none is counted,
// and the next decision counts on from what committed.
func TestAFailedBatchAnswersEveryMemberAndCountsNone(t *testing.T) {
	// Not t.Parallel: it sets the package-wide commit hook.
	s := sqlitetest.Open(t, storeConfig(""))
	var commits int
	defer sqlite.SetCommitHook(func(string) error {
		if commits++; commits == 2 {
			return errors.New("forced failure")
		}
		return nil
	})()
	q := formQueue(t, s, attempts(6, "k"), nil)
	for i, r := range q.wait() {
		if i == 0 && r.err != nil {
			t.Errorf("the first, decided alone: %v", r.err)
		}
		if i > 0 && (r.err == nil || !errors.Is(r.err, limiter.ErrUnavailable) || len(r.o.Decisions) != 0) {
			t.Errorf("decision %d of the failed batch: %+v, %v; want the store's error", i+1, r.o, r.err)
		}
	}
	if d := allow(t, s, ping, "k", t0); d.Count != 2 {
		t.Errorf("the next decision counts %d, want 2: nothing of the failed batch committed", d.Count)
	}
	db := sqlitetest.Inspect(t, s.Path())
	if n := sqlitetest.QueryInt(t, db, `SELECT count(*) FROM api_calls`); n != 2 {
		t.Errorf("%d audit rows, want 2", n)
	}
}

// TestAQueuedDecisionWhoseContextEndsIsLeftOut: the third of six is
// cancelled while it waits; it is answered with its context's error and
// not counted, and the others are decided as if it had never come.
func TestAQueuedDecisionWhoseContextEndsIsLeftOut(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, storeConfig(""))
	ctx, cancel := context.WithCancel(context.Background())
	ctxs := make([]context.Context, 6)
	ctxs[2] = ctx
	q := formQueue(t, s, attempts(6, "k"), ctxs)
	cancel()
	// It leaves the queue by itself, before the lock is let go.
	waitFor(t, func() bool { return sqlite.Queued(s, 0) == 4 })
	var counts []int64
	for i, r := range q.wait() {
		if i == 2 {
			if !errors.Is(r.err, context.Canceled) {
				t.Errorf("the cancelled decision: %v, want context.Canceled", r.err)
			}
			continue
		}
		if r.err != nil {
			t.Fatalf("decision %d: %v", i+1, r.err)
		}
		counts = append(counts, r.o.Decisions[0].Count)
	}
	if !slices.Equal(counts, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("counts %v, want 1 to 5", counts)
	}
	if n := sqlitetest.QueryInt(t, sqlitetest.Inspect(t, s.Path()), `SELECT count FROM rate_limit_windows`); n != 5 {
		t.Errorf("stored %d, want 5", n)
	}
}

// TestALoneDecisionIsNotBatched: one decision at a time is one
// transaction each, started at once.
func TestALoneDecisionIsNotBatched(t *testing.T) {
	t.Parallel()
	s := sqlitetest.Open(t, storeConfig(filepath.Join(t.TempDir(), "rl.db")))
	for range 5 {
		allow(t, s, ping, "k", t0)
	}
	if st := s.Stats(); st.Batches != 5 || st.Batched != 5 || st.LargestBatch != 1 || st.BusyRetries != 0 {
		t.Errorf("stats %+v; want 5 batches of one, no waiting", st)
	}
}

func queryColumn(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
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
	return out
}

// A turn lingers after a batch only where that can gather anything: on
// EFS, where a transaction holds the lock for tens of milliseconds, for a
// 16th of it up to 2 ms; in WAL on a local disk, where it holds it for a
// fraction of a millisecond, not at all, since its clients could not be
// back in time and the linger would leave the lock idle. Where the
// clients of a batch have been coming back within a transaction (back),
// for a whole transaction, up to 2 ms: they form one batch. (Exploring,
// a whole transaction whatever was learnt, where a turn lingers at all:
// TestALingerExploresEverySixteenth.)
func TestATurnLingersOnlyWhereItCanGather(t *testing.T) {
	for _, c := range []struct {
		hold, back, want time.Duration
	}{
		{300 * time.Microsecond, 0, 0},                                               // WAL, local disk
		{300 * time.Microsecond, 100 * time.Microsecond, 0},                          // however fast they come
		{16*sqlite.MinLinger - 1, 0, 0},                                              // just short of the shortest
		{16 * sqlite.MinLinger, 0, sqlite.MinLinger},                                 // the shortest
		{1700 * time.Microsecond, 0, 106250 * time.Nanosecond},                       // DELETE, local disk, not learnt
		{1700 * time.Microsecond, 600 * time.Microsecond, 1700 * time.Microsecond},   // clients back in 0.6 ms
		{1700 * time.Microsecond, 1701 * time.Microsecond, 106250 * time.Nanosecond}, // back later than a transaction
		{10 * time.Millisecond, 0, 625 * time.Microsecond},
		{10 * time.Millisecond, time.Millisecond, 2 * time.Millisecond},
		{10 * time.Millisecond, 3 * time.Millisecond, 625 * time.Microsecond},       // back later than the 2 ms it would wait
		{1700 * time.Microsecond, 1700 * time.Microsecond, 1700 * time.Microsecond}, // back just within one
		{90 * time.Millisecond, 0, 2 * time.Millisecond},                            // EFS
		{90 * time.Millisecond, time.Millisecond, 2 * time.Millisecond},
	} {
		if got := sqlite.LingerFor(c.hold, c.back, false); got != c.want {
			t.Errorf("a transaction of %v, clients back in %v: lingers %v, want %v", c.hold, c.back, got, c.want)
		}
	}
}

// A request that finds no transaction in flight, where transactions are
// short (WAL on a local disk), lets the goroutines ready to run go first:
// requests about to ask for the shard join its batch rather than form the
// next. One processor makes "ready to run" nearly exact: three requests
// are started, and a fourth, made before any of them has run, leads a
// batch of all four. (Without the yield it led a batch of one, and the
// three followed, each alone, every time.) Go's scheduler now and then
// runs a yielding goroutine before others that are ready, so most of ten
// tries must form one batch, not all. Not parallel: it sets GOMAXPROCS
// for the process.
func TestALeaderLetsThoseReadyToRunJoinItsBatch(t *testing.T) {
	s := sqlitetest.Open(t, sqlite.Config{Path: filepath.Join(t.TempDir(), "rl.db"), JournalMode: "WAL"})
	many := limiter.Policy{Name: "ping", Limit: 1000, Window: time.Minute}
	allow(t, s, many, "k", t0)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	together := 0
	for range 10 {
		// A WAL transaction's on a local disk, as measured without the
		// race detector, which makes them several times longer; and
		// requests queueing, as in a busy process.
		sqlite.SetBusy(s, 200*time.Microsecond)
		before := s.Stats()
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() { allow(t, s, many, fmt.Sprint("k", i), t0) })
		}
		allow(t, s, many, "k", t0)
		wg.Wait()
		if st := s.Stats(); st.Batches-before.Batches == 1 && st.Batched-before.Batched == 4 {
			together++
		}
	}
	if together < 6 {
		t.Errorf("four requests ready together formed one batch in %d tries of 10; want most", together)
	}
}

// A leader yields (TestALeaderLetsThoseReadyToRunJoinItsBatch) only where
// it can gather anything and nothing else gathers: transactions too
// short for a turn to linger, and requests queueing for the shard lately.
// A process whose requests come one at a time never yields: a yield waits
// behind every goroutine ready to run, and in a server whose other work
// computes, that is up to a time slice (10 ms) with the shard's turn
// held.
func TestALeaderYieldsOnlyWhereRequestsQueue(t *testing.T) {
	for _, c := range []struct {
		hold, since time.Duration
		want        bool
	}{
		{200 * time.Microsecond, 300 * time.Microsecond, true},     // a busy local server in WAL
		{200 * time.Microsecond, sqlite.ContendedWithin - 1, true}, // queued lately
		{200 * time.Microsecond, sqlite.ContendedWithin, false},    // not lately
		{200 * time.Microsecond, time.Hour, false},                 // one request at a time
		{16*sqlite.MinLinger - 1, 0, true},                         // no turn lingers
		{16 * sqlite.MinLinger, 0, false},                          // a turn lingers: it gathers them
		{1700 * time.Microsecond, 300 * time.Microsecond, false},   // DELETE, local disk
		{90 * time.Millisecond, 0, false},                          // EFS
	} {
		if got := sqlite.YieldsFirst(c.hold, c.since); got != c.want {
			t.Errorf("transactions of %v, a request queued %v ago: yields %v, want %v", c.hold, c.since, got, c.want)
		}
	}
}
