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
	dir := t.TempDir()
	bin := filepath.Join(dir, "local-api")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
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
