package namespaces_test

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/namespaces"
)

// store holds a pointer, as every store does: Go's tiny allocator packs
// small values without pointers into one block with others, and a block
// lives while any of them does.
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
	use := func(namespace, name string) namespaces.Use { return namespaces.Use{Namespace: namespace, Name: name} }
	if err := namespaces.Claim(a, use("", "ping")); err != nil {
		t.Fatal(err)
	}
	if err := namespaces.Claim(a, use("", "ping")); err != nil {
		t.Errorf("the same policy again: %v", err)
	}
	if err := namespaces.Claim(a, use("", "daily")); err == nil || !strings.Contains(err.Error(), `policy "daily" counts under the client key alone on a store where policy "ping" already does`) {
		t.Errorf("another policy on the store: %v", err)
	}
	// A namespace is held as the plain keys are, apart from them.
	if err := namespaces.Claim(a, use("daily", "daily")); err != nil {
		t.Errorf("a namespace of its own: %v", err)
	}
	if err := namespaces.Claim(a, use("daily", "weekly")); err == nil || !strings.Contains(err.Error(), `policy "weekly" counts in namespace "daily" on a store where policy "daily" already does`) {
		t.Errorf("another policy in the namespace: %v", err)
	}
	// All or none: refused for one, the others are not claimed, and each
	// conflict is named.
	err := namespaces.Claim(a, use("weekly", "weekly"), use("daily", "monthly"), use("", "yearly"))
	for _, want := range []string{`policy "monthly" counts in namespace "daily"`, `policy "yearly" counts under the client key alone`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("two conflicts beside a good use: %v, want it to say %q", err, want)
		}
	}
	if err := namespaces.Claim(a, use("weekly", "hourly")); err != nil {
		t.Errorf("weekly's namespace, after a refused claim that named it: %v", err)
	}
	if err := namespaces.Claim(b, use("", "daily")); err != nil {
		t.Errorf("another store: %v", err)
	}
	// A store that is no pointer is not told apart, and never a panic:
	// a comparable type holding a slice used to be a map key, and panic.
	if err := namespaces.Claim(hidden{any: &store{}}, use("", "x")); err != nil {
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
		if err := namespaces.Claim(s, namespaces.Use{Name: "p"}); err != nil {
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
