// Package fieldname tells an HTTP field name from what no request's
// header could be named: the domain checks a rule's tier header with it,
// and the HTTP layer a key function's header, alike.
package fieldname

import "strings"

// Valid reports whether s is an HTTP field name (RFC 9110's token), at
// most 128 characters.
func Valid(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
