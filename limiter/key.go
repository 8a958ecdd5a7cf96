package limiter

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxKeyBytes is the longest client key accepted, in bytes.
const MaxKeyBytes = 256

// ErrInvalidKey is wrapped by the errors ValidKey returns.
var ErrInvalidKey = errors.New("invalid client key")

// ValidKey reports why key cannot be a client key, or nil. A key is 1 to
// MaxKeyBytes bytes of valid UTF-8 without control characters. Keys are
// stored and echoed exactly, so rejecting is the only safe answer to bytes
// that a JSON response or a log line would have to alter.
func ValidKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidKey, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: contains control character %U", ErrInvalidKey, r)
		}
	}
	return nil
}
