package main_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLocalServerSaysListeningOnlyOnceItListens holds the address the
// server is told to use: the server must fail to bind it and exit non-zero
// without ever logging "listening", the line clients (and
// TestLocalServerEndToEnd) wait for before they connect.
func TestLocalServerSaysListeningOnlyOnceItListens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := localAPI(t)
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ADDR="+held.Addr().String(), "DB_PATH=", "RATE_LIMIT=", "WINDOW_SECONDS=")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("exit status 0 with %s taken, want a failure", held.Addr())
	}
	if !strings.Contains(string(out), "address already in use") {
		t.Fatalf("the server did not fail to bind the taken address %s:\n%s", held.Addr(), out)
	}
	if strings.Contains(string(out), `"msg":"listening"`) {
		t.Errorf("the server logged \"listening\" on %s, which it never bound:\n%s", held.Addr(), out)
	}
}

// TestLocalServerListsEveryConfigurationProblem starts the server with
// several bad settings: it must refuse to start, before touching any file,
// and name every one of them in plain text.
func TestLocalServerListsEveryConfigurationProblem(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := localAPI(t)
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RATE_LIMIT=abc", "ADDR=bogus", "PRUNE_INTERVAL=1ns", "FAIL_MODE=maybe", "DB_PATH=")
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() != 2 {
		t.Errorf("exit = %v, want status 2", err)
	}
	for _, name := range []string{"RATE_LIMIT:", "ADDR:", "PRUNE_INTERVAL:", "FAIL_MODE:"} {
		if !strings.Contains(string(out), name) {
			t.Errorf("output does not name %s:\n%s", name, out)
		}
	}
	if strings.Contains(string(out), `{"time"`) {
		t.Errorf("configuration errors came as a JSON log line, not text:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("the data directory was created before the configuration was checked")
	}
}

// TestLocalServerRefusesWhatItWouldNotServe: a port out of range, which
// used to pass -check and fail when the server bound it; an argument,
// which used to be ignored (settings are the environment's); a DB_PATH
// whose directory's parent does not exist, which used to be created as a
// tree, hiding a typo.
func TestLocalServerRefusesWhatItWouldNotServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := localAPI(t)
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"-check"}, []string{"ADDR=0.0.0.0:99999"}, `ADDR: port "99999" is not from 0 to 65535`},
		{nil, []string{"ADDR=0.0.0.0:99999"}, `ADDR: port "99999" is not from 0 to 65535`},
		{[]string{"-check", "extra"}, nil, `unexpected argument "extra"`},
		{[]string{"-check"}, []string{"ADDR= 127.0.0.1:3000"}, `ADDR: host " 127.0.0.1" is not an IP address or a host name`},
		{[]string{"-check"}, []string{"ADDR=999.1.1.1:80"}, `ADDR: host "999.1.1.1" is not an IP address or a host name`},
		{nil, []string{"ADDR=127.0.0.1:0", "DB_PATH=" + filepath.Join(bin, "x.db")}, "is a file, not a directory"},
		{[]string{"-check"}, []string{"JOURNAL_MODE=MEMORY"}, `"MEMORY" is not DELETE, TRUNCATE, PERSIST or WAL`},
		{nil, []string{"ADDR=127.0.0.1:0", "DB_PATH=" + filepath.Join(dir, "typo", "data", "x.db")}, "DB_PATH: " + filepath.Join(dir, "typo") + " does not exist"},
	} {
		// A server that starts instead of refusing is stopped, and fails
		// the test, rather than serve until the test times out.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, tc.args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("%v %v: %v, want a failure saying %q:\n%s", tc.env, tc.args, err, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "typo")); !os.IsNotExist(err) {
		t.Errorf("a DB_PATH two directories deep into nothing was created: %v", err)
	}
}

// TestCheckAdvisesTruncateWithShards: several shards with the default
// DELETE journal are accepted, with the advice docs/capacity.md gives.
func TestCheckAdvisesTruncateWithShards(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := localAPI(t)
	for journal, advised := range map[string]bool{"": true, "TRUNCATE": false} {
		cmd := exec.Command(bin, "-check")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SQLITE_SHARDS=4", "JOURNAL_MODE="+journal, "STORE=", "POLICIES=")
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "advice: with several shards, JOURNAL_MODE=TRUNCATE") != advised {
			t.Errorf("4 shards, journal %q: %v, advice %v wanted:\n%s", journal, err, advised, out)
		}
	}
}
