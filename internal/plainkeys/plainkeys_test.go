package plainkeys_test

import (
	"strings"
	"testing"

	"github.com/ft251/ratelimit/internal/plainkeys"
)

type store struct{ n int }

type unhashable struct{ m map[string]int }

func TestClaim(t *testing.T) {
	a, b := &store{}, &store{}
	if err := plainkeys.Claim(a, "ping"); err != nil {
		t.Fatal(err)
	}
	if err := plainkeys.Claim(a, "ping"); err != nil {
		t.Errorf("the same policy again: %v", err)
	}
	if err := plainkeys.Claim(a, "daily"); err == nil || !strings.Contains(err.Error(), `policy "daily" counts under the client key alone on a store where policy "ping" already does`) {
		t.Errorf("another policy on the store: %v", err)
	}
	if err := plainkeys.Claim(b, "daily"); err != nil {
		t.Errorf("another store: %v", err)
	}
	if err := plainkeys.Claim(unhashable{}, "x"); err != nil {
		t.Errorf("a store that cannot be told apart: %v", err)
	}
}
