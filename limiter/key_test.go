package limiter_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ft251/ratelimit/limiter"
)

func TestValidKey(t *testing.T) {
	for _, k := range []string{"a", "127.0.0.1", "user:42", "a,b", "clé-ключ-鍵-🔑", "with space", strings.Repeat("x", 256), strings.Repeat("é", 128)} {
		if err := limiter.ValidKey(k); err != nil {
			t.Errorf("ValidKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range []string{"", strings.Repeat("x", 257), strings.Repeat("é", 128) + "x", "a\x00b", "line\nbreak", "tab\t", "del\x7f", "c1\u0085", "\xff\xfe", "a\x1fb"} {
		if err := limiter.ValidKey(k); !errors.Is(err, limiter.ErrInvalidKey) {
			t.Errorf("ValidKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
}
