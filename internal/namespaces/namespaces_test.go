package namespaces_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/namespaces"
)

// store holds a pointer, as every store does: Go's tiny allocator packs
// small values without pointers into one block with others (a claim's
// settings string among them), and a block lives while any of them does.
type store struct {
	n    int
	name *string
}

type hidden struct {
	any
	hist []string
}

func TestClaim(t *testing.T) {
	a, b := &store{}, &store{}
	if err := namespaces.Claim(a, "", "ping", "1/s"); err != nil {
		t.Fatal(err)
	}
	if err := namespaces.Claim(a, "", "ping", "1/s"); err != nil {
		t.Errorf("the same policy again: %v", err)
	}
	if err := namespaces.Claim(a, "", "daily", "1/s"); err == nil || !strings.Contains(err.Error(), `policy "daily" counts under the client key alone on a store where policy "ping" already does`) {
		t.Errorf("another policy on the store: %v", err)
	}
	if err := namespaces.Claim(a, "", "ping", "2/s"); err == nil || !strings.Contains(err.Error(), `policy "ping" counts under the client key alone on a store where another policy "ping" already does (a Middleware, Limit or Limiter of this process), 2/s against 1/s`) {
		t.Errorf("the same name with other settings: %v", err)
	}
	// A namespace is held as the plain keys are, apart from them.
	if err := namespaces.Claim(a, "daily", "daily", "1/s"); err != nil {
		t.Errorf("a namespace of its own: %v", err)
	}
	if err := namespaces.Claim(a, "daily", "weekly", "1/s"); err == nil || !strings.Contains(err.Error(), `policy "weekly" counts in namespace "daily" on a store where policy "daily" already does`) {
		t.Errorf("another policy in the namespace: %v", err)
	}
	if err := namespaces.Claim(b, "", "daily", "1/s"); err != nil {
		t.Errorf("another store: %v", err)
	}
	// A store that is no pointer is not told apart, and never a panic:
	// a comparable type holding a slice used to be a map key, and panic.
	if err := namespaces.Claim(hidden{any: &store{}}, "", "x", "1/s"); err != nil {
		t.Errorf("a store that is a value: %v", err)
	}
	runtime.KeepAlive(a)
}

// TestAStoreIsHeldWeakly: a store the program has let go is collected,
// its claim with it; a claim held it, and all it counted, for good.
func TestAStoreIsHeldWeakly(t *testing.T) {
	collected := make(chan struct{}, 100)
	for range 100 {
		s := &store{n: 1}
		runtime.AddCleanup(s, func(struct{}) { collected <- struct{}{} }, struct{}{})
		if err := namespaces.Claim(s, "", "p", "1/s"); err != nil {
			t.Fatal(err)
		}
	}
	// Cleanups run after a collection, on a goroutine of their own.
	n := 0
	for try := 0; try < 200 && n < 100; try++ {
		runtime.GC()
		select {
		case <-collected:
			n++
		case <-time.After(10 * time.Millisecond):
		}
	}
	if n < 90 {
		t.Errorf("%d of 100 stores let go were collected, want them all (a few may be late)", n)
	}
}
