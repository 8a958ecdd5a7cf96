// Package testbin builds the executables that tests run as separate
// processes (the local server, the Lambda functions, the Runtime Interface
// Emulator) once, and shares them: between the tests of one test binary,
// and between the test binaries of one `go test ./...` and of the next.
//
// A build goes to a directory of its own under os.TempDir(), named by a
// hash of what was asked (the package, the flags, the environment, the
// module's directory, Go's version), and is made under a lock on that
// directory, so that two test binaries running side by side wait for one
// build rather than make two. go build itself then does what makes a
// second run cheap: it leaves an executable whose build ID says it is up to
// date as it is, and relinks it when a source file changed. Linking is the
// expensive part of a build once the build cache is warm (a second or two
// for the SDK-sized functions on a 2-core machine), and a test run used to
// build local-api 28 times.
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Spec is one executable to build.
type Spec struct {
	// Dir is where go build runs; a relative Dir is the test's working
	// directory's (go test runs in the package's directory).
	Dir string
	// Pkg is the package, as go build takes it in Dir: "." or
	// "./functions/ping", or a tool's import path.
	Pkg string
	// Name is the executable's file name, "bootstrap" for a Lambda
	// function; the package's last element when empty.
	Name string
	// Flags go before -o: "-tags", "lambda.norpc", "-trimpath".
	Flags []string
	// Env is added to the test's environment: "CGO_ENABLED=0".
	Env []string
}

// built holds the builds this process has made, by key.
var built sync.Map // key -> *result

type result struct {
	once sync.Once
	path string
	err  error
}

// Build returns the path of s's executable, built once per test binary and
// reused from an earlier run when go build finds it up to date. A build
// that fails fails the test, with go build's output.
func Build(tb testing.TB, s Spec) string {
	tb.Helper()
	path, err := Path(s)
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// Path is Build for TestMain, which has no testing.TB: the executable's
// path, or why it could not be built.
func Path(s Spec) (string, error) {
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return "", fmt.Errorf("testbin: %w", err)
	}
	s.Dir = dir
	if s.Name == "" {
		s.Name = filepath.Base(strings.TrimSuffix(s.Pkg, "/"))
		if s.Pkg == "." {
			s.Name = filepath.Base(dir)
		}
	}
	k := key(s)
	v, _ := built.LoadOrStore(k, &result{})
	r := v.(*result)
	r.once.Do(func() { r.path, r.err = build(s, filepath.Join(os.TempDir(), "ratelimit-testbin", k)) })
	return r.path, r.err
}

// key names s's build: everything that changes the executable except the
// sources, which go build checks itself.
func key(s Spec) string {
	h := sha256.New()
	for _, part := range [][]string{{runtime.Version(), s.Dir, s.Pkg, s.Name}, s.Flags, s.Env} {
		fmt.Fprintf(h, "%q\n", part)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// build runs go build for s into dir, holding dir's lock meanwhile.
func build(s Spec, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("testbin: %w", err)
	}
	unlock, err := lock(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	out := filepath.Join(dir, s.Name)
	args := append(append([]string{"build"}, s.Flags...), "-o", out, s.Pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), s.Env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s (in %s): %v\n%s", strings.Join(args, " "), s.Dir, err, b)
	}
	return out, nil
}

// lock takes an exclusive lock on the file at path, waiting for another
// process that holds it, and returns its release.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testbin: lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("testbin: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}
