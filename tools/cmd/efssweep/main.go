// Command efssweep measures the rate limiter on a model of EFS: for each
// per-operation latency it mounts tools/cmd/latencyfs, runs
// internal/cmd/loadtest for each number of processes (Lambda execution
// environments) on one database file on the mount, reads the file-system
// operations each decision made, and writes the results as JSON and a chart
// of decisions/s against latency. From the repository root:
//
//	sudo go -C tools run ./cmd/efssweep       # as root: it mounts FUSE
//	go -C tools run ./cmd/efssweep -latencies 0,500us,2.7ms -procs 1,2,4,8 -duration 10s \
//	    -json ../docs/efs-sweep.json -png ../docs/efs-throughput.png
//
// go -C runs it in tools/, so relative paths in its arguments start there.
//
// The file-system calls per decision are latencyfs's counters over the load
// alone (loadtest zeros them when its workers start and reads them when the
// last has finished), without the opens of every shard before it or the
// exactness check after. Each row prints them by kind, and the fewest and
// most decisions any process made. The sweep fails (exit 1) when a count is
// not exact, and with -max-calls or -max-spread when a run makes more calls
// per decision, or spreads decisions between processes more widely:
//
//	sudo go -C tools run ./cmd/efssweep -latencies 250us/2.7ms -procs 16 -clients 1 -keys 1000 -shards 64 -duration 10s -max-calls 60 -max-spread 2
//
// A latency is either one duration for every operation or READ/WRITE, such
// as 250us/2.7ms, for read-class and write-class operations apart. Each
// process runs one client, as a Lambda execution environment serves one
// request at a time.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// point is one measurement: a latency model and a number of processes.
type point struct {
	Latency       string             `json:"latency"`
	ReadLatency   time.Duration      `json:"read_latency_ns"`
	WriteLatency  time.Duration      `json:"write_latency_ns"`
	Procs         int                `json:"procs"`
	Clients       int                `json:"clients"`
	Keys          int                `json:"keys"`
	Shards        int                `json:"shards"`
	Batch         int                `json:"max_batch"`
	Policies      int                `json:"policies"`
	Batches       int64              `json:"batches"`
	Batched       int64              `json:"batched"`
	Across        int64              `json:"cross_shard"`
	BusyHandler   string             `json:"busy_handler"`
	Journal       string             `json:"journal"`
	BufferWrites  bool               `json:"buffer_writes"`
	RejectCache   bool               `json:"reject_cache"`
	Rate          float64            `json:"rate_per_client"`
	StoreWrites   int64              `json:"store_writes"`
	FromMemory    int64              `json:"from_memory"`
	Decisions     int64              `json:"decisions"`
	PerSecond     float64            `json:"decisions_per_s"`
	P50           time.Duration      `json:"p50_ns"`
	P99           time.Duration      `json:"p99_ns"`
	Max           time.Duration      `json:"max_ns"`
	TimedOut      int64              `json:"timed_out"`
	Retries       int64              `json:"busy_retries"`
	Probes        int64              `json:"lock_probes"`
	Yields        int64              `json:"yields"`
	Errors        int64              `json:"errors"`
	MinPerProc    int64              `json:"min_per_proc"`
	MaxPerProc    int64              `json:"max_per_proc"`
	Exact         bool               `json:"exact"`
	OpsPerDecison float64            `json:"fs_ops_per_decision"`
	OpsByKind     map[string]float64 `json:"fs_ops_by_kind_per_decision"`
	// FS is latencyfs's counters over the load alone, as loadtest read
	// them (its -fs-stats): without the opens before it or the check after.
	FS *fsStats `json:"fs,omitempty"`
}

func main() {
	latencies := flag.String("latencies", "0,500us,2.7ms", "comma-separated latency models: D, or READ/WRITE")
	procs := flag.String("procs", "1,2,4,8", "comma-separated process counts")
	clients := flag.String("clients", "1", "comma-separated clients per process (concurrent requests in one process, which batch)")
	shards := flag.String("shards", "1", "comma-separated SQLITE_SHARDS values")
	batch := flag.Int("batch", 0, "most decisions per transaction (0: the store's default; 1: no group commit)")
	policies := flag.Int("policies", 1, "policies per request (loadtest -policies)")
	cross := flag.Bool("cross", false, "loadtest -cross (with -via store): the other policies under other client keys, mostly in other shards")
	via := flag.String("via", "handler", "loadtest -via: handler or store")
	plotFrom := flag.String("plot", "", "only draw -png from these comma-separated JSON files of earlier runs")
	xAxis := flag.String("x", "latency", "the chart's x axis: latency, shards or clients")
	duration := flag.Duration("duration", 10*time.Second, "load per run")
	keys := flag.Int("keys", 16, "distinct client keys")
	limit := flag.Int64("limit", 100, "RATE_LIMIT")
	window := flag.Int64("window", 60, "WINDOW_SECONDS")
	buffered := flag.Bool("buffer-writes", false, "latencyfs -buffer-writes: writes free, fsync and close pay (an NFS client's write-back cache)")
	busy := flag.Duration("busy", 3*time.Second, "BUSY_TIMEOUT")
	handler := flag.String("busy-handler", "store", "store or sqlite")
	journal := flag.String("journal", "DELETE", "JOURNAL_MODE")
	cache := flag.Bool("reject-cache", false, "REJECT_CACHE=on in the workers")
	rate := flag.Float64("rate", 0, "requests per second per client (0: as fast as possible)")
	maxCalls := flag.Float64("max-calls", 0, "fail (exit 1) when a run makes more file-system calls (read- and write-class round trips) per decision than this; 0: no limit")
	maxSpread := flag.Float64("max-spread", 0, "fail (exit 1) when a run's busiest process makes more than this many times the decisions of its least busy one; 0: no limit")
	jsonOut := flag.String("json", "", "write results as JSON lines here")
	pngOut := flag.String("png", "", "draw decisions/s against latency here")
	flag.Parse()
	if *plotFrom != "" {
		check(plotFiles(strings.Split(*plotFrom, ","), *xAxis, *pngOut))
		return
	}

	work, err := os.MkdirTemp("", "efssweep-")
	check(err)
	defer os.RemoveAll(work)
	bins := build(work)

	var results []point
	for _, model := range strings.Split(*latencies, ",") {
		rd, wr, err := parseModel(model)
		check(err)
		m := mount(bins["latencyfs"], work, rd, wr, *buffered)
		for _, runs := range combos(*shards, *clients, *procs) {
			n, c, p := runs[0], runs[1], runs[2]
			pt := point{Latency: model, ReadLatency: rd, WriteLatency: wr, BusyHandler: *handler, Journal: *journal,
				BufferWrites: *buffered, RejectCache: *cache, Rate: *rate}
			out := run(bins["loadtest"], "-json", "-fs-stats", m.base, "-db", filepath.Join(m.dir, "ratelimit.db"), "-procs", p,
				"-clients", c, "-shards", n, "-batch", strconv.Itoa(*batch), "-policies", strconv.Itoa(*policies), "-cross="+strconv.FormatBool(*cross), "-via", *via,
				"-keys", strconv.Itoa(*keys), "-duration", duration.String(),
				"-limit", strconv.FormatInt(*limit, 10), "-window", strconv.FormatInt(*window, 10), "-busy", busy.String(), "-busy-handler", *handler,
				"-journal", *journal, "-reject-cache="+strconv.FormatBool(*cache), "-rate", strconv.FormatFloat(*rate, 'f', -1, 64))
			check(json.Unmarshal(out, &pt))
			if pt.FS == nil {
				check(fmt.Errorf("loadtest reported no file-system counters"))
			}
			pt.perDecision()
			fmt.Printf("latency=%-12s shards=%-2d procs=%-2d clients=%-2d decisions/s=%7.1f store tx/s=%6.1f p50=%-10v p99=%-10v max=%-10v per proc %d..%d (%.2fx)  fs ops/decision=%.1f timed out=%d exact=%v\n",
				model, pt.Shards, pt.Procs, pt.Clients, pt.PerSecond, float64(pt.StoreWrites)/duration.Seconds(), pt.P50.Round(time.Microsecond), pt.P99.Round(time.Microsecond), pt.Max.Round(time.Microsecond),
				pt.MinPerProc, pt.MaxPerProc, pt.spread(), pt.OpsPerDecison, pt.TimedOut, pt.Exact)
			fmt.Printf("  fs ops/decision by kind: %s\n", pt.byKind())
			fmt.Printf("  per decision: %.2f lock waits that tried again, %.2f looks at a held lock, %.2f commits that gave way\n",
				pt.per(pt.Retries), pt.per(pt.Probes), pt.per(pt.Yields))
			results = append(results, pt)
		}
		m.unmount()
	}
	if *jsonOut != "" {
		var b bytes.Buffer
		for _, r := range results {
			json.NewEncoder(&b).Encode(r)
		}
		check(os.WriteFile(*jsonOut, b.Bytes(), 0o644))
	}
	if *pngOut != "" {
		check(plotThroughput(results, *xAxis, *pngOut))
	}
	if failed := verdicts(results, *maxCalls, *maxSpread); len(failed) > 0 {
		for _, f := range failed {
			fmt.Fprintln(os.Stderr, "efssweep: FAIL:", f)
		}
		os.Exit(1)
	}
}

// combos is every (shards, clients, procs) of the three comma-separated
// lists, in that nesting.
func combos(shards, clients, procs string) [][3]string {
	var out [][3]string
	for _, n := range strings.Split(shards, ",") {
		for _, c := range strings.Split(clients, ",") {
			for _, p := range strings.Split(procs, ",") {
				out = append(out, [3]string{strings.TrimSpace(n), strings.TrimSpace(c), strings.TrimSpace(p)})
			}
		}
	}
	return out
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "efssweep:", err)
		os.Exit(1)
	}
}

// parseModel reads "D" or "READ/WRITE".
func parseModel(s string) (rd, wr time.Duration, err error) {
	r, w, split := strings.Cut(s, "/")
	if rd, err = time.ParseDuration(r); err != nil && r == "0" {
		err = nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("latency %q: %w", s, err)
	}
	if !split {
		return rd, rd, nil
	}
	wr, err = time.ParseDuration(w)
	return rd, wr, err
}

// pkg names the programs the sweep runs, by import path, so that it
// builds them from any directory inside the tools module. loadtest is the
// service module's (internal/cmd), since it drives the service's own
// handler and store options, which the service keeps internal.
var pkg = map[string]string{
	"latencyfs": "github.com/ft251/ratelimit/tools/cmd/latencyfs",
	"loadtest":  "github.com/ft251/ratelimit/internal/cmd/loadtest",
}

// build compiles the programs the sweep runs, so that no `go run` overhead
// lands inside a measurement.
func build(dir string) map[string]string {
	bins := map[string]string{}
	for _, name := range []string{"latencyfs", "loadtest"} {
		bins[name] = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", bins[name], pkg[name])
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		check(cmd.Run())
	}
	return bins
}

func run(bin string, args ...string) []byte {
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	// loadtest exits 1 when a count is not exact; the row says so.
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 1 {
		check(err)
	}
	return out
}

type mounted struct {
	cmd  *exec.Cmd
	dir  string
	base string // of latencyfs's counters: http://ADDR
}

type fsStats struct {
	Ops        map[string]int64 `json:"ops"`
	ReadClass  int64            `json:"read_class"`
	WriteClass int64            `json:"write_class"`
}

// mount starts latencyfs over a fresh directory and waits until its stats
// endpoint answers, which it does once the mount is up.
func mount(bin, work string, rd, wr time.Duration, buffered bool) *mounted {
	root, err := os.MkdirTemp(work, "root-")
	check(err)
	mnt := root + ".mnt"
	addr := "127.0.0.1:" + strconv.Itoa(7070+os.Getpid()%1000)
	cmd := exec.Command(bin, "-root", root, "-mnt", mnt, "-read-latency", rd.String(), "-write-latency", wr.String(),
		"-buffer-writes="+strconv.FormatBool(buffered), "-stats-addr", addr)
	cmd.Stderr = io.Discard
	check(cmd.Start())
	m := &mounted{cmd: cmd, dir: mnt, base: "http://" + addr}
	for deadline := time.Now().Add(30 * time.Second); ; {
		if resp, err := http.Get("http://" + addr + "/stats"); err == nil {
			resp.Body.Close()
			return m
		}
		if time.Now().After(deadline) {
			check(fmt.Errorf("latencyfs did not come up on %s", addr))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *mounted) unmount() {
	m.cmd.Process.Signal(os.Interrupt)
	m.cmd.Wait()
}
