// Package testproc lets a test binary double as the other processes its
// tests start: a writer to kill mid-transaction, a worker deciding until it
// is killed, a process holding the database lock. The test starts this very
// binary again with Command, naming a role; the binary's TestMain calls
// Main (or RunRole), which plays the role instead of running the tests.
package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Environment variables that carry the role and its argument to the child.
const (
	roleVar = "RATELIMIT_TEST_ROLE"
	argVar  = "RATELIMIT_TEST_ROLE_ARG"
)

// Main is TestMain for a test binary with roles: RunRole, then the tests.
func Main(m *testing.M, roles map[string]func(arg string)) {
	RunRole(roles)
	os.Exit(m.Run())
}

// RunRole plays the role this process was started for by Command, with its
// argument, and exits; a process started by go test has no role, and
// RunRole returns at once. A role it does not know is an error, so that a
// misspelled one cannot pass for a test run.
func RunRole(roles map[string]func(arg string)) {
	role, ok := os.LookupEnv(roleVar)
	if !ok {
		return
	}
	play, ok := roles[role]
	if !ok {
		fmt.Fprintf(os.Stderr, "testproc: no role %q in this test binary\n", role)
		os.Exit(2)
	}
	play(os.Getenv(argVar))
	os.Exit(0)
}

// Command is this test binary again, to play role with arg. Its stderr is
// the test's; the caller sets up stdin and stdout and starts it.
func Command(role, arg string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleVar+"="+role, argVar+"="+arg)
	cmd.Stderr = os.Stderr
	return cmd
}
