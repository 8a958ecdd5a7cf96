// Fuzz it for real with:
//
//	go test -fuzz=FuzzValidKey -fuzztime=60s ./limiter/
//
// With Go 1.26 a timed run can end in a bare "context deadline exceeded" with
// no failing input written: a race in the fuzzing coordinator at the end of
// -fuzztime (golang/go#75804), not a finding. A count such as
// -fuzztime=100000x does not race.
//
// A plain `go test ./limiter/` runs the f.Add seeds and the corpus in
// testdata/fuzz/FuzzValidKey.

package limiter_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ft251/ratelimit/limiter"
)

// FuzzValidKey checks ValidKey against the contract written in its doc
// comment, computed independently: a key is accepted exactly when it is 1 to
// MaxKeyBytes bytes of valid UTF-8 without a rune that unicode.IsControl
// reports, a bidi control or U+FFFD (what a decoder puts in place of bytes
// that were not UTF-8). Every rejection wraps ErrInvalidKey.
func FuzzValidKey(f *testing.F) {
	for _, seed := range []string{
		"", "a", "127.0.0.1", "a,b", "a, b", "clé 鍵", "🔑", "e\u0301", "\u202eevil", "\ufeffbom",
		"'; DROP TABLE rate_limit_windows; --",
		strings.Repeat("x", 256), strings.Repeat("x", 257), strings.Repeat("🔑", 64), strings.Repeat("🔑", 65)[:257],
		(strings.Repeat("x", 254) + "🔑")[:256], // a rune cut by the limit
		"a\x00b", "\x1f", "\x7f", "\u0085", "\u2028", "\xff", "\xed\xa0\x80", // a UTF-16 surrogate, encoded
		"a\ufffdb", // what Lambda's JSON decoding makes of "a\xffb" or a lone surrogate
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := limiter.ValidKey(key)
		bidi := func(r rune) bool { // the controls that reorder displayed text
			return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
		}
		want := len(key) >= 1 && len(key) <= limiter.MaxKeyBytes && utf8.ValidString(key) &&
			strings.IndexFunc(key, unicode.IsControl) < 0 && strings.IndexFunc(key, bidi) < 0 && !strings.ContainsRune(key, '\uFFFD')
		switch {
		case want && err != nil:
			t.Fatalf("ValidKey(%q) = %v, but the key is 1..%d bytes of UTF-8 without control characters or U+FFFD", key, err, limiter.MaxKeyBytes)
		case !want && err == nil:
			t.Fatalf("ValidKey(%q) accepted a key of %d bytes (valid UTF-8: %t)", key, len(key), utf8.ValidString(key))
		case err != nil && !errors.Is(err, limiter.ErrInvalidKey):
			t.Fatalf("ValidKey(%q) = %v, which does not wrap ErrInvalidKey", key, err)
		}
	})
}
