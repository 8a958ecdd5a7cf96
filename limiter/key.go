package limiter

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxKeyBytes is the longest client key accepted, in bytes.
const maxKeyBytes = 256

// ValidKey reports why key cannot be a client key, or nil. A key is 1 to
// 256 bytes of valid UTF-8 without control characters (bidi
// controls included) and without U+FFFD. Keys are stored and echoed
// exactly, so rejecting is the only safe answer to bytes that a JSON
// response or a log line would have to alter. U+FFFD, the replacement
// character, is what a decoder writes in place of bytes that are not
// UTF-8: Lambda's JSON decoding of an event turns a raw 0xFF or a lone
// surrogate into it before the handler sees the key, so distinct raw keys
// would share one counter. Refusing it answers such keys alike everywhere.
func ValidKey(key string) error {
	switch {
	case key == "":
		return refuse(ErrInvalidKey, "empty")
	case len(key) > maxKeyBytes:
		return refuse(ErrInvalidKey, "%d bytes, more than %d", len(key), maxKeyBytes)
	case !utf8.ValidString(key):
		return refuse(ErrInvalidKey, "not valid UTF-8")
	case strings.ContainsRune(key, utf8.RuneError):
		return refuse(ErrInvalidKey, "contains U+FFFD, which stands for bytes that were not UTF-8")
	}
	for _, r := range key {
		if unicode.IsControl(r) || isBidiControl(r) {
			return refuse(ErrInvalidKey, "contains control character %U", r)
		}
	}
	return nil
}

// isBidiControl reports the invisible characters that reorder text
// (U+061C, U+200E-U+200F, U+202A-U+202E, U+2066-U+2069): a key holding
// them displays as another key in logs and dashboards. Other invisible
// format characters, such as the joiner in emoji sequences, are allowed.
func isBidiControl(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}
