// Command loadtest drives /ping decisions from several processes at once,
// each with its own store handle on one SQLite file, as that many Lambda
// execution environments would, and checks that every count is exact.
//
//	go -C tools run ./cmd/loadtest -procs 1,2,4,8 -clients 4 -keys 16 -duration 10s
//
// Each process runs -clients goroutines that call the /ping handler (or,
// with -via store, the store alone) for -duration, spreading attempts over
// -keys keys. It prints one row per process count: decisions/s, latency
// percentiles, lock waits that ran out (busy), other errors, the fewest and
// most decisions any one process made, and the exactness check: for every
// key and window, the stored count equals the attempts counted, the allowed
// ones equal min(attempts, limit), and so do the audit rows.
//
// Point -db at a file on the latency file system (tools/cmd/latencyfs) to
// see the same on a model of EFS.
package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/rejectcache"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/internal/sqlitetune"
	"github.com/ft251/ratelimit/internal/stores"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

type options struct {
	db       string
	procs    []int
	clients  int
	keys     int
	duration time.Duration
	limit    int64
	window   int64
	journal  string
	busy     time.Duration
	via      string
	handler  string
	keep     bool
	cache    bool
	rate     float64
	backlog  int
	worker   int
	jsonOut  bool
	shards   int
	batch    int
	policies int
	cross    bool
	fsStats  string
}

func main() {
	o := parseFlags()
	if o.worker == -2 {
		if err := pruner(o); err != nil {
			fatal(err)
		}
		return
	}
	if o.worker >= 0 {
		if err := worker(o); err != nil {
			fatal(err)
		}
		return
	}
	var rows []row
	for _, p := range o.procs {
		r, err := run(o, p)
		if err != nil {
			fatal(err)
		}
		rows = append(rows, r)
		if o.jsonOut {
			json.NewEncoder(os.Stdout).Encode(r)
		}
	}
	if !o.jsonOut {
		printTable(os.Stdout, o, rows)
	}
	for _, r := range rows {
		if !r.Exact {
			os.Exit(1)
		}
	}
}

// parseFlags reads the command line into options.
func parseFlags() options {
	var o options
	var procs string
	flag.StringVar(&o.db, "db", filepath.Join(os.TempDir(), "ratelimit-loadtest", "ratelimit.db"), "database file; removed first unless -keep")
	flag.StringVar(&procs, "procs", "1,2,4", "comma-separated process counts, one run each")
	flag.IntVar(&o.clients, "clients", 4, "concurrent clients per process")
	flag.IntVar(&o.keys, "keys", 16, "distinct client keys")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "how long each run drives load")
	flag.Int64Var(&o.limit, "limit", 100, "RATE_LIMIT")
	flag.Int64Var(&o.window, "window", 60, "WINDOW_SECONDS")
	flag.StringVar(&o.journal, "journal", "DELETE", "JOURNAL_MODE: DELETE, TRUNCATE, PERSIST or WAL")
	flag.DurationVar(&o.busy, "busy", sqlite.DefaultBusyTimeout, "BUSY_TIMEOUT")
	flag.StringVar(&o.via, "via", "handler", "handler (the full /ping handler) or store (Store.Allow alone)")
	flag.StringVar(&o.handler, "busy-handler", "store", "who waits for the lock: store (fair, the default) or sqlite (SQLite's busy handler)")
	flag.BoolVar(&o.keep, "keep", false, "keep the database between runs")
	flag.BoolVar(&o.jsonOut, "json", false, "print rows as JSON lines instead of a table")
	flag.BoolVar(&o.cache, "reject-cache", false, "deny keys already denied in the window from memory (REJECT_CACHE=on)")
	flag.Float64Var(&o.rate, "rate", 0, "requests per second per client; 0 is as fast as possible")
	flag.IntVar(&o.backlog, "prune-backlog", 0, "seed this many expired windows and prune them from another process during the run")
	flag.IntVar(&o.worker, "worker", -1, "internal: run as worker process N (-2: the pruner)")
	flag.IntVar(&o.shards, "shards", 1, "SQLITE_SHARDS: files the counters are spread over")
	flag.IntVar(&o.batch, "batch", 0, "most decisions of a process in one transaction (0: the store's default; 1: no group commit, as before it)")
	flag.IntVar(&o.policies, "policies", 1, "policies per request: ping, then others that count every attempt and deny none, under the same client key (so in the same shard)")
	flag.BoolVar(&o.cross, "cross", false, "with -via store: the other policies count under another client key each (key/pN, as another key source would), mostly in other shards")
	flag.StringVar(&o.fsStats, "fs-stats", "", "base URL of latencyfs's counters (http://ADDR): zeroed when the load starts and read when it ends, so that the row's fs_ops are the decisions' alone, without the opens before or the check after")
	flag.Parse()
	if o.cross && o.via != "store" {
		fatal(errors.New("-cross needs -via store: the handler takes every policy's key from the request"))
	}
	for _, p := range strings.Split(procs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("-procs: %q is not a positive number", p))
		}
		o.procs = append(o.procs, n)
	}
	return o
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "loadtest:", err)
	os.Exit(2)
}

func (o options) storeConfig() sqlite.Config {
	return sqlite.Config{Path: o.db, JournalMode: o.journal, BusyTimeout: o.busy, Shards: o.shards}
}

// tuned is ctx carrying the store's measuring knobs that o sets, for
// sqlite.Open.
func (o options) tuned(ctx context.Context) context.Context {
	return sqlitetune.With(ctx, sqlitetune.Options{SQLiteBusyHandler: o.handler == "sqlite", MaxBatch: o.batch})
}

func (o options) policy() limiter.Policy {
	return limiter.Policy{Name: envconfig.DefaultPolicyName, Limit: o.limit, Window: time.Duration(o.window) * time.Second}
}

// keyOf is the client key an attempt for key counts under with p: key
// itself, or with -cross for the other policies, key/<name>.
func (o options) keyOf(p limiter.Policy, key string) string {
	if o.cross && p.Name != envconfig.DefaultPolicyName {
		return key + "/" + p.Name
	}
	return key
}

// rules are the policies of every request: ping (o.limit), and o.policies-1
// more, p2, p3, ..., that count every attempt and deny none, each in a
// namespace of its own, so that a key's counters under them hash to other
// shards.
func (o options) rules() []limiter.Rule {
	ks := limiter.KeySource{Kind: limiter.KeyFromHeader}
	rules := []limiter.Rule{{Policy: o.policy(), KeySource: ks, Routes: []string{"/ping"}}}
	for i := 2; i <= o.policies; i++ {
		p := o.policy()
		p.Name, p.Namespace, p.Limit = fmt.Sprint("p", i), fmt.Sprint("p", i), 1<<50
		rules = append(rules, limiter.Rule{Policy: p, KeySource: ks, Routes: []string{"/ping"}})
	}
	return rules
}

// result is what one worker process reports.
type result struct {
	Decisions int64            `json:"decisions"`
	Allowed   int64            `json:"allowed"`
	Rejected  int64            `json:"rejected"`
	Busy      int64            `json:"timed_out"`
	Retries   int64            `json:"busy_retries"`
	Probes    int64            `json:"lock_probes"`
	Yields    int64            `json:"yields"`
	Errors    int64            `json:"errors"`
	Latency   *hist            `json:"latency"`
	Writes    int64            `json:"store_writes"` // write transactions committed
	Batches   int64            `json:"batches"`      // transactions of decisions of one shard
	Batched   int64            `json:"batched"`      // decisions in them
	Across    int64            `json:"cross_shard"`  // decisions across shards
	Attempts  map[string]int64 `json:"attempts"`     // "key\twindow" → decided attempts
	Memory    map[string]int64 `json:"memory"`       // "key\twindow" → denials from memory
	Granted   map[string]int64 `json:"granted"`      // "key\twindow" → allowed attempts
	FirstErr  string           `json:"first_error,omitempty"`
}

// worker runs in its own process: it opens its own store handle, says
// "ready", waits for "go" on stdin, drives load and prints its result.
func worker(o options) error {
	ctx := context.Background()
	store, err := sqlite.Open(o.tuned(ctx), o.storeConfig())
	if err != nil {
		return err
	}
	defer store.Close()
	// Open every shard before the load (a function's init opens shard 0
	// alone, and the others open when a request first needs them), so
	// that no cold open lands inside a measurement.
	if err := store.Ready(ctx); err != nil {
		return err
	}
	if err := stores.OpenShards(ctx, store); err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	var decider limiter.Store = store
	if o.cache {
		decider = rejectcache.New(store, 0)
	}
	memory := &memoryCounter{Store: decider, n: map[string]int64{}}
	api, err := service.New(service.Options{Store: memory, Logger: logger, Rules: o.rules()})
	if err != nil {
		fatal(err)
	}

	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("wait for go: %w", err)
	}
	deadline := time.Now().Add(o.duration)
	total := newResult()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range o.clients {
		wg.Go(func() {
			r := client(ctx, o, c, deadline, api, store)
			mu.Lock()
			total.add(r)
			mu.Unlock()
		})
	}
	wg.Wait()
	st := store.Stats()
	total.Retries, total.Writes, total.Batches, total.Batched, total.Across = st.BusyRetries, st.Writes, st.Batches, st.Batched, st.CrossShard
	total.Probes, total.Yields = st.Probes, st.Yields
	total.Memory = memory.n
	if err := json.NewEncoder(os.Stdout).Encode(total); err != nil {
		return err
	}
	// The store closes (its files' closes are file-system calls) only once
	// the parent has read every worker's counters: stdin closes then.
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// pruneResult is what the pruner process reports.
type pruneResult struct {
	Deleted int64         `json:"deleted"`
	Elapsed time.Duration `json:"elapsed_ns"`
	Batches int64         `json:"batches"`
	Longest time.Duration `json:"longest_batch_ns"`
}

// pruner runs in its own process, as the scheduled prune function would:
// a tenth into the run it prunes the seeded backlog once.
// client is one client of a worker: requests until the deadline, paced
// at -rate when it is set, over -keys keys, and what became of them.
func client(ctx context.Context, o options, c int, deadline time.Time, api *service.API, store *sqlite.Store) result {
	r := newResult()
	rng := rand.New(rand.NewPCG(uint64(o.worker), uint64(c)))
	next := time.Now()
	for time.Now().Before(deadline) {
		if o.rate > 0 { // paced: the next request at its slot, not sooner
			time.Sleep(time.Until(next))
			next = next.Add(time.Duration(float64(time.Second) / o.rate))
		}
		key := fmt.Sprintf("k%04d", rng.IntN(o.keys))
		start := time.Now()
		allowed, window, err := decideOne(ctx, o, api, store, key)
		r.Latency.add(time.Since(start))
		switch {
		case err != nil:
			if errors.Is(err, errBusy) {
				r.Busy++
			} else {
				r.Errors++
			}
			if r.FirstErr == "" {
				r.FirstErr = err.Error()
			}
			continue
		case allowed:
			r.Allowed++
			r.Granted[key+"\t"+window]++
		default:
			r.Rejected++
		}
		r.Decisions++
		r.Attempts[key+"\t"+window]++
	}
	return r
}

func pruner(o options) error {
	store, err := sqlite.Open(o.tuned(context.Background()), o.storeConfig())
	if err != nil {
		return err
	}
	defer store.Close()
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	time.Sleep(o.duration / 10)
	start := time.Now()
	p, err := store.Prune(context.Background(), time.Now(), time.Time{})
	if err != nil {
		return err
	}
	st := store.Stats()
	return json.NewEncoder(os.Stdout).Encode(pruneResult{Deleted: p.Windows, Elapsed: time.Since(start), Batches: st.Writes, Longest: st.LongestWrite})
}

func newResult() result {
	return result{Latency: newHist(), Attempts: map[string]int64{}, Granted: map[string]int64{}, Memory: map[string]int64{}}
}

// memoryCounter counts, per key and window, the denials a reject cache made
// from memory, which the store never saw.
type memoryCounter struct {
	limiter.Store
	mu sync.Mutex
	n  map[string]int64
}

func (m *memoryCounter) Allow(ctx context.Context, a limiter.Attempt) (limiter.Outcome, error) {
	ctx, whole := decide.Capture(ctx)
	o, err := m.Store.Allow(ctx, a)
	if err == nil && whole.FromMemory {
		m.mu.Lock()
		m.n[a.Charges[0].Key+"\t"+decide.FormatWindow(o.Decisions[0].WindowStart)]++
		m.mu.Unlock()
	}
	return o, err
}

func (r *result) add(o result) {
	r.Decisions += o.Decisions
	r.Allowed += o.Allowed
	r.Rejected += o.Rejected
	r.Busy += o.Busy
	r.Retries += o.Retries
	r.Probes += o.Probes
	r.Yields += o.Yields
	r.Writes += o.Writes
	r.Batches += o.Batches
	r.Batched += o.Batched
	r.Across += o.Across
	for k, n := range o.Memory {
		r.Memory[k] += n
	}
	r.Errors += o.Errors
	r.Latency.merge(o.Latency)
	for k, n := range o.Attempts {
		r.Attempts[k] += n
	}
	for k, n := range o.Granted {
		r.Granted[k] += n
	}
	if r.FirstErr == "" {
		r.FirstErr = o.FirstErr
	}
}

var errBusy = errors.New("lock wait ran out")

// decideOne makes one decision and reports whether it was allowed and in
// which window.
func decideOne(ctx context.Context, o options, api *service.API, store *sqlite.Store, key string) (bool, string, error) {
	if o.via == "store" {
		a := limiter.Attempt{Now: time.Now(), Route: "GET /ping", RequestID: "loadtest"}
		for _, r := range o.rules() {
			a.Charges = append(a.Charges, limiter.Charge{Policy: r.Policy, Key: o.keyOf(r.Policy, key)})
		}
		out, err := store.Allow(ctx, a)
		if err != nil {
			if strings.Contains(err.Error(), "database is locked") {
				return false, "", fmt.Errorf("%w: %w", errBusy, err)
			}
			return false, "", err
		}
		return out.Allowed, decide.FormatWindow(out.Decisions[0].WindowStart), nil
	}
	r := httptest.NewRequest(http.MethodGet, "/ping", nil)
	r.Header.Set("X-Client-Key", key)
	w := httptest.NewRecorder()
	api.ServeHTTP(w, r)
	switch w.Code {
	case http.StatusOK, http.StatusTooManyRequests:
	case http.StatusServiceUnavailable:
		// The handler hides the cause; a 503 under load is a lock wait
		// that ran out unless the store is broken, which the first run
		// with a single process would show.
		return false, "", fmt.Errorf("%w: 503 %s", errBusy, strings.TrimSpace(w.Body.String()))
	default:
		return false, "", fmt.Errorf("status %d: %s", w.Code, w.Body.String())
	}
	reset, err := strconv.ParseInt(w.Header().Get("X-RateLimit-Reset"), 10, 64)
	if err != nil {
		return false, "", fmt.Errorf("no X-RateLimit-Reset: %v", w.Header())
	}
	window := decide.FormatWindow(time.Unix(reset-o.window, 0))
	return w.Code == http.StatusOK, window, nil
}

// row is one run's outcome.
type row struct {
	Procs      int           `json:"procs"`
	Clients    int           `json:"clients"`
	Keys       int           `json:"keys"`
	Shards     int           `json:"shards"`
	Batch      int           `json:"max_batch"`
	Policies   int           `json:"policies"`
	Batches    int64         `json:"batches"`
	Batched    int64         `json:"batched"`
	Across     int64         `json:"cross_shard"`
	Decisions  int64         `json:"decisions"`
	PerSecond  float64       `json:"decisions_per_s"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	Max        time.Duration `json:"max_ns"`
	Busy       int64         `json:"timed_out"`
	Retries    int64         `json:"busy_retries"`
	Probes     int64         `json:"lock_probes"`
	Yields     int64         `json:"yields"`
	Writes     int64         `json:"store_writes"`
	FromMemory int64         `json:"from_memory"`
	Errors     int64         `json:"errors"`
	MinPerProc int64         `json:"min_per_proc"`
	MaxPerProc int64         `json:"max_per_proc"`
	Windows    int           `json:"windows_checked"`
	Exact      bool          `json:"exact"`
	Mismatches []string      `json:"mismatches,omitempty"`
	FirstError string        `json:"first_error,omitempty"`
	Prune      *pruneResult  `json:"prune,omitempty"`
	// FS is latencyfs's counters over the load alone, with -fs-stats.
	FS *fsCounts `json:"fs,omitempty"`
}

// run starts procs worker processes on one fresh database, lets them drive
// load for the duration, and checks the database against what they counted.
func run(o options, procs int) (row, error) {
	if err := prepare(o); err != nil {
		return row{}, err
	}
	ps, err := startWorkers(o, procs)
	if err != nil {
		return row{}, err
	}
	return collect(o, procs, ps)
}

// prepare lays the database out for a run: its directory, no file of an
// earlier run (unless -keep), every shard's schema created and migrated
// once, so workers do not race for it, and the -backlog.
func prepare(o options) error {
	if err := os.MkdirAll(filepath.Dir(o.db), 0o755); err != nil {
		return err
	}
	if !o.keep {
		// The database, its shards, journals and waiting rooms.
		old, _ := filepath.Glob(o.db + "*")
		for _, p := range old {
			os.Remove(p)
		}
	}
	// sqlite.Open alone opens nothing: Ready opens shard 0, and
	// OpenShards the others, so that the workers find every file made.
	s, err := sqlite.Open(o.tuned(context.Background()), o.storeConfig())
	if err == nil {
		if err = s.Ready(context.Background()); err == nil {
			err = stores.OpenShards(context.Background(), s)
		}
		s.Close()
	}
	if err != nil {
		return err
	}
	if o.backlog > 0 {
		return seedBacklog(o)
	}
	return nil
}

// proc is a worker process, with its pipes.
type proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startWorkers starts procs workers (and a pruner after them, with a
// -backlog), waits until each is ready, and starts them all at once.
func startWorkers(o options, procs int) ([]proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	n := procs
	if o.backlog > 0 {
		n++ // the last one prunes
	}
	ps := make([]proc, n)
	for i := range ps {
		id := i
		if i == procs {
			id = -2
		}
		cmd := exec.Command(self, "-worker", strconv.Itoa(id), "-db", o.db, "-clients", strconv.Itoa(o.clients),
			"-keys", strconv.Itoa(o.keys), "-duration", o.duration.String(), "-limit", strconv.FormatInt(o.limit, 10),
			"-window", strconv.FormatInt(o.window, 10), "-journal", o.journal, "-busy", o.busy.String(), "-via", o.via, "-busy-handler", o.handler,
			"-reject-cache="+strconv.FormatBool(o.cache), "-rate", strconv.FormatFloat(o.rate, 'f', -1, 64),
			"-shards", strconv.Itoa(o.shards), "-batch", strconv.Itoa(o.batch), "-policies", strconv.Itoa(o.policies),
			"-cross="+strconv.FormatBool(o.cross))
		cmd.Stderr = os.Stderr
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		ps[i] = proc{cmd, stdin, bufio.NewReader(stdout)}
	}
	for i, p := range ps {
		if line, err := p.out.ReadString('\n'); err != nil || line != "ready\n" {
			return nil, fmt.Errorf("worker %d: %q %v", i, line, err)
		}
	}
	if o.fsStats != "" {
		if _, err := fsCounters(o.fsStats, true); err != nil {
			return nil, err
		}
	}
	for _, p := range ps {
		io.WriteString(p.stdin, "go\n")
	}
	return ps, nil
}

// collect reads what each worker (and the pruner) did, adds it up, and
// checks the counts.
func collect(o options, procs int, ps []proc) (row, error) {
	total := newResult()
	r := row{Procs: procs, Clients: o.clients, Keys: o.keys, Shards: o.shards, Batch: o.batch, Policies: o.policies, MinPerProc: -1}
	if o.backlog > 0 {
		r.Prune = &pruneResult{}
		if err := json.NewDecoder(ps[procs].out).Decode(r.Prune); err != nil {
			return row{}, fmt.Errorf("pruner: %w", err)
		}
		ps[procs].cmd.Wait()
		ps = ps[:procs]
	}
	results := make([]result, len(ps))
	for i, p := range ps {
		if err := json.NewDecoder(p.out).Decode(&results[i]); err != nil {
			return row{}, fmt.Errorf("worker %d result: %w", i, err)
		}
	}
	if o.fsStats != "" {
		fs, err := fsCounters(o.fsStats, false)
		if err != nil {
			return row{}, err
		}
		r.FS = &fs
	}
	for i, p := range ps {
		p.stdin.Close() // the worker closes its store and exits
		if err := p.cmd.Wait(); err != nil {
			return row{}, fmt.Errorf("worker %d: %w", i, err)
		}
		res := results[i]
		total.add(res)
		if r.MinPerProc < 0 || res.Decisions < r.MinPerProc {
			r.MinPerProc = res.Decisions
		}
		r.MaxPerProc = max(r.MaxPerProc, res.Decisions)
	}
	r.Decisions, r.Busy, r.Retries, r.Errors, r.FirstError = total.Decisions, total.Busy, total.Retries, total.Errors, total.FirstErr
	r.Probes, r.Yields = total.Probes, total.Yields
	r.Writes, r.Batches, r.Batched, r.Across = total.Writes, total.Batches, total.Batched, total.Across
	for _, n := range total.Memory {
		r.FromMemory += n
	}
	r.PerSecond = float64(total.Decisions) / o.duration.Seconds()
	r.P50, r.P99, r.Max = total.Latency.quantile(0.50), total.Latency.quantile(0.99), total.Latency.Max
	var err error
	r.Windows, r.Mismatches, err = check(o, total)
	r.Exact = err == nil && len(r.Mismatches) == 0
	return r, err
}

// seedBacklog writes o.backlog windows that expired long ago, for the
// pruner to delete while the workers decide.
func seedBacklog(o options) error {
	db, err := sql.Open("sqlite", "file:"+o.db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(`WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?1 - 1)
INSERT INTO rate_limit_windows (key, window_start, count, window_seconds)
SELECT printf('old%07d', i), '2020-01-01T00:00:00Z', 1, ?2 FROM n`, o.backlog, o.window)
	return err
}

// check compares the database (every shard of it) with what the workers
// counted: per key and window, stored count = attempts, allowed =
// min(attempts, limit), audit rows = allowed; and under every further
// policy, the same count as under ping (each attempt counted under all, or
// none).
func check(o options, total result) (int, []string, error) {
	type counts struct{ stored, audit int64 }
	got := map[string]*counts{}
	other := map[string]int64{} // "policy\x1fkey\twindow" → count
	for i := range max(o.shards, 1) {
		if err := readShard(sqlite.ShardPath(o.db, i), func(k, w string, n int64) {
			if strings.Contains(k, "\x1f") {
				other[k+"\t"+w] += n
				return
			}
			if got[k+"\t"+w] == nil {
				got[k+"\t"+w] = &counts{}
			}
			got[k+"\t"+w].stored += n
		}, func(k, w string, n int64) {
			if got[k+"\t"+w] == nil {
				got[k+"\t"+w] = &counts{}
			}
			got[k+"\t"+w].audit += n
		}); err != nil {
			return 0, nil, err
		}
	}
	var bad []string
	for kw, attempts := range total.Attempts {
		g := got[kw]
		if g == nil {
			g = &counts{}
		}
		allowed := min(attempts, o.limit)
		reached := attempts - total.Memory[kw] // denials from memory never reach the store
		if g.stored != reached || total.Granted[kw] != allowed || g.audit != allowed {
			bad = append(bad, fmt.Sprintf("%s: attempts %d (%d from memory), stored %d, allowed %d (want %d), audit rows %d",
				strings.ReplaceAll(kw, "\t", " @ "), attempts, total.Memory[kw], g.stored, total.Granted[kw], allowed, g.audit))
		}
		for _, r := range o.rules()[1:] {
			key, window, _ := strings.Cut(kw, "\t")
			k := decide.StoreKey(r.Policy, o.keyOf(r.Policy, key)) + "\t" + window
			if other[k] != g.stored {
				bad = append(bad, fmt.Sprintf("%s: stored %d under %s, %d under ping", strings.ReplaceAll(kw, "\t", " @ "), other[k], r.Policy.Name, g.stored))
			}
			delete(other, k)
		}
		delete(got, kw)
	}
	for kw, g := range got {
		bad = append(bad, fmt.Sprintf("%s: stored %d and %d audit rows nobody counted", kw, g.stored, g.audit))
	}
	for kw, n := range other {
		bad = append(bad, fmt.Sprintf("%q: stored %d nobody counted", kw, n))
	}
	return len(total.Attempts), bad, nil
}

// readShard reads one file's counters and audit rows per key and window.
func readShard(path string, window, audit func(key, window string, n int64)) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range []struct {
		sql string
		f   func(key, window string, n int64)
	}{
		{`SELECT key, window_start, count FROM rate_limit_windows`, window},
		{`SELECT key, window_start, count(*) FROM api_calls GROUP BY key, window_start`, audit},
	} {
		rows, err := db.Query(q.sql)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for rows.Next() {
			var k, w string
			var n int64
			if err := rows.Scan(&k, &w, &n); err != nil {
				rows.Close()
				return err
			}
			q.f(k, w, n)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}

func printTable(w io.Writer, o options, rows []row) {
	fmt.Fprintf(w, "journal=%s via=%s busy_handler=%s reject_cache=%v rate=%v/s/client limit=%d window=%ds busy_timeout=%v duration=%v max_batch=%d policies=%d db=%s\n",
		o.journal, o.via, o.handler, o.cache, o.rate, o.limit, o.window, o.busy, o.duration, o.batch, o.policies, o.db)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "procs\tclients\tshards\tkeys\tdecisions\tdecisions/s\tstore tx/s\tdecisions/batch\tacross shards\tfrom memory\tp50\tp99\tmax\tbusy retries\ttimed out\terrors\tmin/max per proc\texact\t")
	for _, r := range rows {
		exact := fmt.Sprintf("ok (%d windows)", r.Windows)
		if !r.Exact {
			exact = fmt.Sprintf("NO (%d of %d)", len(r.Mismatches), r.Windows)
		}
		retries := strconv.FormatInt(r.Retries, 10)
		if o.handler == "sqlite" {
			retries = "n/a" // inside SQLite, not counted
		}
		perBatch := 0.0
		if r.Batches > 0 {
			perBatch = float64(r.Batched) / float64(r.Batches)
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%d\t%d\t%v\t%v\t%v\t%s\t%d\t%d\t%d/%d\t%s\t\n",
			r.Procs, r.Clients, r.Shards, r.Keys, r.Decisions, r.PerSecond, float64(r.Writes)/o.duration.Seconds(), perBatch, r.Across, r.FromMemory,
			round(r.P50), round(r.P99), round(r.Max), retries, r.Busy, r.Errors, r.MinPerProc, r.MaxPerProc, exact)
	}
	tw.Flush()
	for _, r := range rows {
		for _, m := range r.Mismatches {
			fmt.Fprintln(w, "  mismatch:", m)
		}
		if r.FirstError != "" {
			fmt.Fprintf(w, "  procs=%d first error: %s\n", r.Procs, r.FirstError)
		}
		if p := r.Prune; p != nil {
			fmt.Fprintf(w, "  procs=%d: meanwhile another process pruned %d windows in %v, %d batches, the longest %v (decisions: p99 %v, max %v)\n",
				r.Procs, p.Deleted, round(p.Elapsed), p.Batches, round(p.Longest), round(r.P99), round(r.Max))
		}
	}
}

func round(d time.Duration) time.Duration {
	switch {
	case d > 10*time.Millisecond:
		return d.Round(time.Millisecond)
	case d > 10*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}
