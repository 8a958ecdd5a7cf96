package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// logOutToFile is a logOut on a new file, and the file's path.
func logOutToFile(t *testing.T) (string, *logOut) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return path, newLogOut(f)
}

// Lines written at once by many requests reach the file whole, none lost
// or interleaved, once the server closes its output: those longer than
// the buffer too.
func TestLogOutKeepsEveryLineWhole(t *testing.T) {
	path, out := logOutToFile(t)
	const writers, each = 8, 2000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				pad := strings.Repeat("x", i%300)
				if i%500 == 7 {
					pad = strings.Repeat("y", logBuffer+100)
				}
				fmt.Fprintf(out, "%d %d %s\n", g, i, pad)
			}
		}()
	}
	wg.Wait()
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n") {
		var g, i int
		var pad string
		if _, err := fmt.Sscanf(l, "%d %d %s", &g, &i, &pad); err != nil && !strings.HasSuffix(l, " ") {
			t.Fatalf("line %.80q: %v", l, err)
		}
		want := strings.Repeat("x", i%300)
		if i%500 == 7 {
			want = strings.Repeat("y", logBuffer+100)
		}
		if pad != want {
			t.Fatalf("line %d of writer %d cut or mixed with another: %d bytes of padding, want %d", i, g, len(pad), len(want))
		}
		seen[fmt.Sprint(g, i)] = true
	}
	if len(seen) != writers*each {
		t.Errorf("%d distinct lines in the file, want %d", len(seen), writers*each)
	}
}

// A line reaches the file without Close, by itself: a server killed later
// has its earlier lines written.
func TestLogOutFlushesByItself(t *testing.T) {
	path, out := logOutToFile(t)
	fmt.Fprintln(out, `{"msg":"request"}`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if got, _ := os.ReadFile(path); string(got) == "{\"msg\":\"request\"}\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the line is still buffered, 10 s after it was written")
		}
	}
	out.Close()
	fmt.Fprintln(out, "after")
	if got, _ := os.ReadFile(path); !strings.HasSuffix(string(got), "after\n") {
		t.Errorf("a line written after Close is buffered: the file holds %q", got)
	}
}
