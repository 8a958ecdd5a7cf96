// Command fsops counts the file-system calls one /ping decision makes, for
// each journal mode, by running decisions under strace. On EFS every one of
// these calls is a network round trip, so their number, not CPU time, is
// what a decision costs there.
//
//	go -C tools run ./cmd/fsops            # needs strace (Debian package strace)
//	go -C tools run ./cmd/fsops -n 500 -modes DELETE,TRUNCATE,PERSIST,WAL
//	go -C tools run ./cmd/fsops -modes DELETE -policies '[{"name":"ping",...},...]'
//
// -policies decides each request under those policies (POLICIES syntax)
// instead of the one /ping policy, to see what each further policy costs.
//
// For each mode it runs itself twice under `strace -f`: once making n
// decisions through the /ping handler after a warm-up decision, once making
// only the warm-up, and divides the difference by n. Locks are counted from
// fcntl F_SETLK/F_SETLKW/F_OFD_SETLK calls, split into lock and unlock by
// their l_type.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/sqlite"
)

func main() {
	n := flag.Int("n", 200, "decisions to count")
	modes := flag.String("modes", "DELETE,TRUNCATE,PERSIST,WAL", "journal modes to compare")
	child := flag.String("child", "", "internal: run decisions on this database")
	mode := flag.String("mode", "DELETE", "internal: journal mode")
	flag.IntVar(&keys, "keys", 8, "distinct client keys the decisions cycle through")
	flag.StringVar(&policies, "policies", "", "POLICIES to decide each request under (default: the one /ping policy, never denying)")
	flag.Parse()
	if *child != "" {
		if err := decide(*child, *mode, *n); err != nil {
			fmt.Fprintln(os.Stderr, "fsops:", err)
			os.Exit(1)
		}
		return
	}
	if err := compare(strings.Split(*modes, ","), *n); err != nil {
		fmt.Fprintln(os.Stderr, "fsops:", err)
		os.Exit(1)
	}
}

// policies and keys are the -policies and -keys flags, handed to the
// child runs.
var (
	policies string
	keys     int
)

// decide makes one warm-up decision and then n more through the /ping
// handler, as one Lambda execution environment would.
func decide(path, mode string, n int) error {
	store, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, JournalMode: mode, BusyTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer store.Close()
	opts := service.Options{
		Store: store,
		Rules: []limiter.Rule{{Policy: limiter.Policy{Name: "ping", Limit: 1 << 40, Window: time.Minute},
			KeySource: limiter.KeySource{Kind: limiter.KeyFromHeader}, Routes: []string{"/ping"}}},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	}
	if policies != "" {
		cfg, err := readEnv(func(k string) string {
			return map[string]string{"POLICIES": policies, "DB_PATH": path}[k]
		})
		if err != nil {
			return err
		}
		opts.Rules = cfg.Rules
	}
	api, err := service.New(opts)
	if err != nil {
		return err
	}
	for i := range n + 1 {
		r := httptest.NewRequest(http.MethodGet, "/ping", nil)
		r.Header.Set("X-Client-Key", fmt.Sprintf("client-%d", i%keys))
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			return fmt.Errorf("decision %d: %d %s", i, w.Code, w.Body)
		}
	}
	return nil
}

// kinds are the columns of the table, in order.
var kinds = []string{"lock", "unlock", "open", "close", "read", "write", "fsync", "stat", "access", "truncate", "unlink"}

// kindOf maps a traced system call to a column, or "" to ignore it.
func kindOf(call, args string) string {
	switch call {
	case "fcntl", "fcntl64":
		switch {
		case !strings.Contains(args, "SETLK"):
			return ""
		case strings.Contains(args, "F_UNLCK"):
			return "unlock"
		default:
			return "lock"
		}
	case "openat", "open", "creat":
		return "open"
	case "close":
		return "close"
	case "pread64", "read", "preadv":
		return "read"
	case "pwrite64", "write", "pwritev":
		return "write"
	case "fsync", "fdatasync":
		return "fsync"
	case "newfstatat", "fstat", "stat", "lstat", "statx":
		return "stat"
	case "access", "faccessat", "faccessat2":
		return "access"
	case "ftruncate", "truncate":
		return "truncate"
	case "unlink", "unlinkat":
		return "unlink"
	}
	return ""
}

var traced = regexp.MustCompile(`^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((.*)$`)

// trace runs this program's child mode under strace and counts the calls
// made on the database directory's files, by kind.
func trace(dir, mode string, n int) (map[string]int, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "strace.out")
	db := filepath.Join(dir, "ratelimit.db")
	cmd := exec.Command("strace", "-f", "-y", "-o", out,
		"-e", "trace=open,openat,creat,close,read,pread64,write,pwrite64,fsync,fdatasync,fcntl,newfstatat,fstat,stat,lstat,statx,access,faccessat,faccessat2,ftruncate,unlink,unlinkat",
		self, "-child", db, "-mode", mode, "-n", strconv.Itoa(n), "-policies", policies, "-keys", strconv.Itoa(keys))
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("strace: %w", err)
	}
	f, err := os.Open(out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := traced.FindStringSubmatch(sc.Text())
		// -y prints each descriptor's path: count only calls on the
		// database, its journal or WAL, and the directory they live in.
		if m == nil || !strings.Contains(m[2], dir) {
			continue
		}
		if k := kindOf(m[1], m[2]); k != "" {
			counts[k]++
		}
	}
	return counts, sc.Err()
}

func compare(modes []string, n int) error {
	if _, err := exec.LookPath("strace"); err != nil {
		return fmt.Errorf("strace is not installed (apt-get install -y strace)")
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "mode\t%s\ttotal\t\n", strings.Join(kinds, "\t"))
	for _, mode := range modes {
		perDecision := map[string]float64{}
		var runs [2]map[string]int
		for i, decisions := range []int{n, 0} {
			dir, err := os.MkdirTemp("", "fsops-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			if runs[i], err = trace(dir, mode, decisions); err != nil {
				return err
			}
		}
		total := 0.0
		row := []string{mode}
		for _, k := range kinds {
			perDecision[k] = float64(runs[0][k]-runs[1][k]) / float64(n)
			total += perDecision[k]
			row = append(row, strconv.FormatFloat(perDecision[k], 'f', 2, 64))
		}
		fmt.Fprintf(tw, "%s\t%.2f\t\n", strings.Join(row, "\t"), total)
	}
	tw.Flush()
	fmt.Printf("\nfile-system calls per /ping decision through the handler, n=%d, %d keys (strace -f -y; calls on the database directory only)\n", n, keys)
	if policies != "" {
		fmt.Printf("policies: %s\n", policies)
	}
	return nil
}

// readEnv reads the configuration as the Lambda functions do.
func readEnv(getenv func(string) string) (envconfig.Config, error) {
	return envconfig.Read(getenv, envconfig.Lambda)
}
