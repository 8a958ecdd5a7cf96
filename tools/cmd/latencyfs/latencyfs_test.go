package main

import (
	"bufio"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

// The tests mount the file system, so they need root and /dev/fuse. Some run
// the test binary again as a child process (see TestMain), because lock
// semantics are about processes.

// childRole, when set in the environment, makes the test binary act as a
// helper process instead of running tests.
const childRole = "LATENCYFS_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childRole); role != "" {
		if err := runChild(role, os.Getenv("LATENCYFS_TEST_PATH")); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// mountT mounts a fresh directory with lat and unmounts it when the test
// ends. It skips, loudly, where FUSE cannot be mounted.
func mountT(tb testing.TB, lat latency) *mount {
	tb.Helper()
	// .ci/run sets RATELIMIT_REQUIRE_TOOLS: there, a skip is a failure.
	skip := tb.Skip
	if os.Getenv("RATELIMIT_REQUIRE_TOOLS") != "" {
		skip = tb.Fatal
	}
	if os.Geteuid() != 0 {
		skip("SKIPPED: latencyfs tests mount FUSE and need root; run them as root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		skip("SKIPPED: latencyfs tests need /dev/fuse: " + err.Error())
	}
	dir := tb.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	m, err := mountFS(config{Root: root, Mountpoint: filepath.Join(dir, "mnt"), Latency: lat})
	if err != nil {
		tb.Fatalf("mount: %v", err)
	}
	tb.Cleanup(func() {
		if err := m.unmount(); err != nil {
			tb.Errorf("unmount: %v", err)
			// Detach it anyway, so that no dead mount outlives the test.
			syscall.Unmount(m.cfg.Mountpoint, syscall.MNT_DETACH)
		}
	})
	return m
}

// path names a file in the mount.
func (m *mount) path(name string) string { return filepath.Join(m.cfg.Mountpoint, name) }

// delta runs fn and returns the ops it caused.
func (m *mount) delta(fn func()) snapshot {
	before := m.snapshot()
	fn()
	return m.snapshot().sub(before)
}

// startChild starts the test binary as a helper with role, on the file at
// path, with pipes to its standard input and output.
func startChild(t *testing.T, role, path string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childRole+"="+role, "LATENCYFS_TEST_PATH="+path)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, in, bufio.NewReader(out)
}

// expectLine reads the child's next line and checks it.
func expectLine(t *testing.T, r *bufio.Reader, want string) {
	t.Helper()
	got, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("child said %q, then %v; want %q", got, err, want)
	}
	if got = strings.TrimSpace(got); got != want {
		t.Fatalf("child said %q, want %q", got, want)
	}
}

// probe runs a child that tests and tries a write lock on path, and returns
// what it saw, e.g. "getlk=W setlk=refused".
func probe(t *testing.T, path string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childRole+"=probe", "LATENCYFS_TEST_PATH="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// The lock range the tests fight over: SQLite's PENDING byte and beyond.
const lockStart, lockLen = 0x40000000, 512

// setlk takes (or with F_UNLCK drops) a POSIX lock on the test range.
func setlk(f *os.File, typ int16, wait bool) error {
	cmd := syscall.F_SETLK
	if wait {
		cmd = syscall.F_SETLKW
	}
	lk := syscall.Flock_t{Type: typ, Whence: io.SeekStart, Start: lockStart, Len: lockLen}
	return syscall.FcntlFlock(f.Fd(), cmd, &lk)
}

// getlk tests for a write lock on the test range and returns the type of
// the lock in the way: "U" for none, "R", "W".
func getlk(f *os.File) (string, error) {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: io.SeekStart, Start: lockStart, Len: lockLen}
	if err := syscall.FcntlFlock(f.Fd(), syscall.F_GETLK, &lk); err != nil {
		return "", err
	}
	return map[int16]string{syscall.F_UNLCK: "U", syscall.F_RDLCK: "R", syscall.F_WRLCK: "W"}[lk.Type], nil
}

// refused reports whether err is F_SETLK's answer to a conflicting lock.
func refused(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES)
}

// runChild is the helper process's main.
func runChild(role, path string) error {
	switch role {
	case "hold":
		// Take a write lock, say so, then on command release it by
		// unlocking or by closing another descriptor of the file, say so,
		// and wait for standard input to close.
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		if err := setlk(f, syscall.F_WRLCK, false); err != nil {
			return fmt.Errorf("hold: %w", err)
		}
		fmt.Println("locked")
		in := bufio.NewReader(os.Stdin)
		cmd, _ := in.ReadString('\n')
		switch strings.TrimSpace(cmd) {
		case "unlock":
			err = setlk(f, syscall.F_UNLCK, false)
		case "close-other":
			var g *os.File
			if g, err = os.Open(path); err == nil {
				err = g.Close()
			}
		default:
			err = fmt.Errorf("unknown command %q", cmd)
		}
		if err != nil {
			return err
		}
		fmt.Println("released")
		io.Copy(io.Discard, in)
		return f.Close()
	case "probe":
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		held, err := getlk(f)
		if err != nil {
			return fmt.Errorf("getlk: %w", err)
		}
		got := "ok"
		if err := setlk(f, syscall.F_WRLCK, false); refused(err) {
			got = "refused"
		} else if err != nil {
			return fmt.Errorf("setlk: %w", err)
		}
		fmt.Printf("getlk=%s setlk=%s\n", held, got)
		return nil
	case "wait":
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Println("waiting")
		if err := setlk(f, syscall.F_WRLCK, true); err != nil {
			return fmt.Errorf("setlkw: %w", err)
		}
		fmt.Println("got")
		return nil
	case "count":
		n, err := strconv.Atoi(os.Getenv("LATENCYFS_TEST_N"))
		if err != nil {
			return err
		}
		return increment(path, n)
	}
	return fmt.Errorf("unknown role %q", role)
}

// dsn opens a database as the rate limiter does on EFS: rollback journal,
// synchronous FULL, immediate transactions.
func dsn(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(DELETE)&_pragma=synchronous(FULL)&_txlock=immediate"
}

// openDB opens the database at path with one connection.
func openDB(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// increment adds 1 to the counter n times, one immediate transaction each.
func increment(path string, n int) error {
	db, err := openDB(path)
	if err != nil {
		return err
	}
	defer db.Close()
	for i := 0; i < n; i++ {
		tx, err := db.Begin()
		if err != nil {
			return fmt.Errorf("increment %d: begin: %w", i, err)
		}
		if _, err := tx.Exec("UPDATE c SET n = n + 1"); err != nil {
			tx.Rollback()
			return fmt.Errorf("increment %d: %w", i, err)
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("increment %d: commit: %w", i, err)
		}
	}
	return nil
}

func TestLockHeldByAnotherProcessIsRefusedUntilReleased(t *testing.T) {
	for _, release := range []string{"unlock", "close-other"} {
		t.Run(release, func(t *testing.T) {
			m := mountT(t, latency{})
			path := m.path("lock.db")
			if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := probe(t, path); got != "getlk=U setlk=ok" {
				t.Fatalf("before any holder: %s, want getlk=U setlk=ok", got)
			}
			_, in, out := startChild(t, "hold", path)
			expectLine(t, out, "locked")

			if got := probe(t, path); got != "getlk=W setlk=refused" {
				t.Errorf("while held: %s, want getlk=W setlk=refused", got)
			}
			// The test process is a third owner: refused too.
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := setlk(f, syscall.F_WRLCK, false); !refused(err) {
				t.Errorf("third process while held: setlk = %v, want EAGAIN or EACCES", err)
			}

			fmt.Fprintln(in, release)
			expectLine(t, out, "released")
			if got := probe(t, path); got != "getlk=U setlk=ok" {
				t.Errorf("after %s: %s, want getlk=U setlk=ok", release, got)
			}
			if err := setlk(f, syscall.F_WRLCK, false); err != nil {
				t.Errorf("third process after %s: setlk = %v, want granted", release, err)
			}
		})
	}
}

func TestLockWaiterIsGrantedWhenHolderReleases(t *testing.T) {
	m := mountT(t, latency{})
	path := m.path("lock.db")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, holdIn, holdOut := startChild(t, "hold", path)
	expectLine(t, holdOut, "locked")
	waiter, _, waitOut := startChild(t, "wait", path)
	expectLine(t, waitOut, "waiting")

	got := make(chan string, 1)
	go func() {
		line, _ := waitOut.ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case line := <-got:
		t.Fatalf("waiter said %q while the lock was held", line)
	case <-time.After(300 * time.Millisecond):
	}
	fmt.Fprintln(holdIn, "unlock")
	expectLine(t, holdOut, "released")
	select {
	case line := <-got:
		if line != "got" {
			t.Fatalf("waiter said %q, want got", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not granted within 10s of the release")
	}
	if err := waiter.Wait(); err != nil {
		t.Errorf("waiter: %v", err)
	}
}

// POSIX locks belong to the process, not the descriptor: two descriptors of
// one process never conflict, and closing either drops the process's locks.
// go-fuse's own loopback gets both wrong (one lock per FUSE handle).
func TestLocksBelongToTheProcessNotTheDescriptor(t *testing.T) {
	m := mountT(t, latency{})
	path := m.path("lock.db")
	if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f1, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f1.Close()
	f2, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close() // closed below; this is for a failure before then
	if err := setlk(f1, syscall.F_RDLCK, false); err != nil {
		t.Fatalf("read lock through the first descriptor: %v", err)
	}
	if err := setlk(f2, syscall.F_WRLCK, false); err != nil {
		t.Fatalf("write lock through the second descriptor of the same process: %v, want granted", err)
	}
	if held, err := getlk(f1); err != nil || held != "U" {
		t.Errorf("getlk by the holder = %q, %v; want U (its own locks do not conflict)", held, err)
	}
	if got := probe(t, path); got != "getlk=W setlk=refused" {
		t.Errorf("other process while held: %s, want getlk=W setlk=refused", got)
	}
	f2.Close()
	if got := probe(t, path); got != "getlk=U setlk=ok" {
		t.Errorf("other process after closing one descriptor: %s, want getlk=U setlk=ok", got)
	}
}

func TestSQLiteIncrementsFromTwoProcessesAreExact(t *testing.T) {
	const perProcess = 200
	m := mountT(t, latency{})
	path := m.path("t.db")
	db, err := openDB(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE c(n INTEGER NOT NULL); INSERT INTO c VALUES (0)"); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "delete" {
		t.Fatalf("journal_mode = %q, %v; want delete", mode, err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childRole+"=count", "LATENCYFS_TEST_PATH="+path,
			"LATENCYFS_TEST_N="+strconv.Itoa(perProcess))
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := cmd.CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("process %d: %v", i, err)
		}
	}

	var n int
	if err := db.QueryRow("SELECT n FROM c").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2*perProcess {
		t.Errorf("count = %d, want %d", n, 2*perProcess)
	}
	var check string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check = %q, %v; want ok", check, err)
	}
}

func TestCountersCountEachOp(t *testing.T) {
	m := mountT(t, latency{})
	f, err := os.Create(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	tests := []struct {
		name string
		do   func() error
		want map[string]int64
	}{
		{"write", func() error { _, err := f.WriteAt([]byte("x"), 0); return err }, map[string]int64{"write": 1}},
		{"read", func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }, map[string]int64{"read": 1}},
		{"fsync", f.Sync, map[string]int64{"fsync": 1}},
		{"lock and unlock", func() error {
			if err := setlk(f, syscall.F_WRLCK, false); err != nil {
				return err
			}
			return setlk(f, syscall.F_UNLCK, false)
		}, map[string]int64{"setlk": 1, "unlock": 1}},
		{"getlk", func() error { _, err := getlk(f); return err }, map[string]int64{"getlk": 1}},
		{"blocking lock", func() error {
			if err := setlk(f, syscall.F_WRLCK, true); err != nil {
				return err
			}
			return setlk(f, syscall.F_UNLCK, false)
		}, map[string]int64{"setlkw": 1, "unlock": 1}},
		{"fstat", func() error { _, err := f.Stat(); return err }, map[string]int64{"getattr": 1}},
		{"truncate", func() error { return f.Truncate(0) }, map[string]int64{"setattr": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			d := m.delta(func() { err = tt.do() })
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for k, want := range tt.want {
				if d.Ops[k] != want {
					t.Errorf("%s: %d, want %d (all: %v)", k, d.Ops[k], want, nonZero(d.Ops))
				}
				n += want
			}
			if d.Total != n {
				t.Errorf("total %d, want %d (all: %v)", d.Total, n, nonZero(d.Ops))
			}
		})
	}

	t.Run("close", func(t *testing.T) {
		d := m.delta(func() { f.Close() })
		if d.Ops["flush"] != 1 {
			t.Errorf("flush: %d, want 1 (all: %v)", d.Ops["flush"], nonZero(d.Ops))
		}
		// RELEASE follows asynchronously.
		deadline := time.Now().Add(5 * time.Second)
		for m.snapshot().Ops["release"] == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if m.snapshot().Ops["release"] == 0 {
			t.Error("no release within 5s of the last close")
		}
	})
}

// nonZero is for messages.
func nonZero(ops map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range ops {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func TestLatencyIsInjectedPerClass(t *testing.T) {
	const write = 100 * time.Millisecond
	m := mountT(t, latency{Write: write})
	f, err := os.Create(m.path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	start := time.Now()
	d := m.delta(func() { f.Stat() })
	if el := time.Since(start); el >= write {
		t.Errorf("fstat (read-class, no read latency) took %v", el)
	}
	if d.SleepNs != 0 {
		t.Errorf("fstat slept %v", time.Duration(d.SleepNs))
	}

	start = time.Now()
	d = m.delta(func() { f.WriteAt([]byte("x"), 0) })
	if el := time.Since(start); el < write {
		t.Errorf("write took %v, want at least %v", el, write)
	}
	if d.SleepNs < int64(write) {
		t.Errorf("write slept %v, want at least %v", time.Duration(d.SleepNs), write)
	}
}

func TestSleepingOpsDoNotBlockEachOther(t *testing.T) {
	const read = 200 * time.Millisecond
	m := mountT(t, latency{Read: read})
	var files []*os.File
	for _, name := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(m.cfg.Root, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(m.path(name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Go(func() { f.ReadAt(make([]byte, 1), 0) })
	}
	wg.Wait()
	// One READ each: serially at least 3×200ms.
	if el := time.Since(start); el >= 2*read {
		t.Errorf("3 concurrent reads took %v, want under %v (they ran one at a time)", el, 2*read)
	}
}

func TestStatsEndpoint(t *testing.T) {
	s := new(stats)
	lat := latency{Read: 250 * time.Microsecond, Write: 2700 * time.Microsecond}
	s.add(opWrite, 3*time.Millisecond)
	s.add(opWrite, 3*time.Millisecond)
	s.add(opLookup, 0)
	s.add(opRelease, 0)
	srv := httptest.NewServer(statsHandler(s, lat))
	defer srv.Close()

	get := func(method, path string) (snapshot, int) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var snap snapshot
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
				t.Fatal(err)
			}
		}
		return snap, resp.StatusCode
	}

	snap, code := get("GET", "/stats")
	if code != 200 || snap.Ops["write"] != 2 || snap.Ops["lookup"] != 1 || snap.Total != 4 ||
		snap.Reads != 1 || snap.Writes != 2 || snap.SleepNs != int64(6*time.Millisecond) ||
		snap.WriteLatencyNs != int64(lat.Write) {
		t.Errorf("GET /stats = %d %+v", code, snap)
	}
	if _, ok := snap.Ops["fsync"]; !ok {
		t.Error("GET /stats leaves out zero counters")
	}
	if _, code := get("GET", "/reset"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /reset = %d, want 405", code)
	}
	if snap, code := get("POST", "/reset"); code != 200 || snap.Total != 4 {
		t.Errorf("POST /reset = %d %+v, want the counters it cleared", code, snap)
	}
	if snap, _ := get("GET", "/stats"); snap.Total != 0 || snap.SleepNs != 0 || snap.Ops["write"] != 0 {
		t.Errorf("after reset: %+v", snap)
	}
}

func TestParseFlags(t *testing.T) {
	base := []string{"-root", "/r", "-mnt", "/m"}
	tests := []struct {
		name        string
		args        []string
		read, write time.Duration
		wantErr     bool
	}{
		{"none", nil, 0, 0, false},
		{"both", []string{"-read-latency", "250us", "-write-latency", "2.7ms"}, 250 * time.Microsecond, 2700 * time.Microsecond, false},
		{"shorthand", []string{"-latency", "1ms"}, time.Millisecond, time.Millisecond, false},
		{"specific wins after", []string{"-latency", "1ms", "-write-latency", "3ms"}, time.Millisecond, 3 * time.Millisecond, false},
		{"specific wins before", []string{"-read-latency", "2ms", "-latency", "1ms"}, 2 * time.Millisecond, time.Millisecond, false},
		{"negative", []string{"-latency", "-1ms"}, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, _, err := parseFlags(append(append([]string{}, base...), tt.args...))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tt.wantErr)
			}
			if !tt.wantErr && (cfg.Latency.Read != tt.read || cfg.Latency.Write != tt.write) {
				t.Errorf("latency = %+v, want read %v write %v", cfg.Latency, tt.read, tt.write)
			}
		})
	}
	if _, _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), "-root") || !strings.Contains(err.Error(), "-mnt") {
		t.Errorf("no flags: %v, want both -root and -mnt reported", err)
	}
}

// BenchmarkSQLiteDecisionOnLatencyFS runs the rate limiter's decision
// transaction (an upsert returning the count, an audit insert, one immediate
// transaction, rollback journal, synchronous FULL) on the mount, without
// latency and with EFS's, and reports decisions per second and file-system
// ops per decision by kind. The database is opened once, as a warm Lambda
// has it open. The first case runs on the backing disk without FUSE, for a
// baseline:
//
//	go -C tools test -run '^$' -bench SQLiteDecision -benchtime 50x ./cmd/latencyfs
func BenchmarkSQLiteDecisionOnLatencyFS(b *testing.B) {
	for _, bc := range []struct {
		name string
		lat  *latency // nil: no FUSE
	}{
		{"disk", nil},
		{"latency=0", &latency{}},
		{"read=250us,write=2.7ms", &latency{Read: 250 * time.Microsecond, Write: 2700 * time.Microsecond}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var m *mount
			path := filepath.Join(b.TempDir(), "ratelimit.db")
			if bc.lat != nil {
				m = mountT(b, *bc.lat)
				path = m.path("ratelimit.db")
			}
			db, err := openDB(path)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			_, err = db.Exec(`CREATE TABLE w(key TEXT, ws TEXT, count INT, PRIMARY KEY(key, ws)) WITHOUT ROWID;
CREATE TABLE a(id INTEGER PRIMARY KEY, key TEXT, ws TEXT, t TEXT, route TEXT, rid TEXT)`)
			if err != nil {
				b.Fatal(err)
			}
			decide := func(i int) error {
				tx, err := db.Begin() // BEGIN IMMEDIATE (_txlock=immediate)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				var count int
				err = tx.QueryRow(`INSERT INTO w(key, ws, count) VALUES('k', 'x', 1)
ON CONFLICT(key, ws) DO UPDATE SET count = count + 1 RETURNING count`).Scan(&count)
				if err != nil {
					return err
				}
				_, err = tx.Exec(`INSERT INTO a(key, ws, t, route, rid) VALUES('k', 'x', ?, '/ping', ?)`,
					time.Now().UTC().Format(time.RFC3339Nano), strconv.Itoa(i))
				if err != nil {
					return err
				}
				return tx.Commit()
			}
			if err := decide(-1); err != nil { // the first creates the row
				b.Fatal(err)
			}

			var before snapshot
			if m != nil {
				before = m.snapshot()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := decide(i); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "decisions/s")
			if m == nil {
				return
			}
			d := m.snapshot().sub(before)
			b.ReportMetric(float64(d.Reads+d.Writes)/n, "roundtrips/decision")
			b.ReportMetric(float64(d.Reads)/n, "reads/decision")
			b.ReportMetric(float64(d.Writes)/n, "writes/decision")
			b.ReportMetric(float64(d.SleepNs)/n/1e6, "sleep-ms/decision")
			for k, v := range nonZero(d.Ops) {
				b.ReportMetric(float64(v)/n, k+"/decision")
			}
		})
	}
}

func TestBufferedWritesAreFreeButSyncsAndClosesPay(t *testing.T) {
	l := latency{Read: time.Millisecond, Write: 3 * time.Millisecond, BufferWrites: true}
	if d := l.of(opWrite); d != 0 {
		t.Errorf("buffered write delayed %v, want 0", d)
	}
	for _, o := range []op{opFsync, opFlush, opSetlk} {
		if d := l.of(o); d != 3*time.Millisecond {
			t.Errorf("%s delayed %v with buffered writes, want 3ms", opInfo[o].name, d)
		}
	}
	l.BufferWrites = false
	if d := l.of(opWrite); d != 3*time.Millisecond {
		t.Errorf("unbuffered write delayed %v, want 3ms", d)
	}
}
