package limiter

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// KeyKind is where a request's client key comes from.
type KeyKind string

// Kinds of KeySource.
const (
	// KeyFromHeader reads the X-Client-Key header, which any client can
	// set; requests without it share the key "127.0.0.1".
	KeyFromHeader KeyKind = "header"
	// KeyFromSourceIP is the address the platform saw the request come from.
	KeyFromSourceIP KeyKind = "source-ip"
	// KeyFromClaim is a claim of the JWT authorizer in front of the API.
	KeyFromClaim KeyKind = "claim"
)

// KeySource says how a request's client key is found. The zero KeySource
// reads the X-Client-Key header, as the design note has it: any client can
// set that header, so a public route wants KeyFromSourceIP, KeyFromClaim,
// or a key function of your own. As the note has it too, requests without
// the header share one key, "127.0.0.1", whatever address they come from.
// KeyFromClaim reads the claims of API Gateway's JWT authorizer, which
// only limiter/awslambda passes on: outside Lambda, a claim of your own
// middleware's is read by a key function (httpapi.KeyFunc).
type KeySource struct {
	// Kind is where the key comes from; empty means KeyFromHeader.
	Kind KeyKind
	// Claim names the JWT claim when Kind is KeyFromClaim.
	Claim string
}

// Validate reports what is wrong with k, or nil: a kind that is none of
// the three, a claim kind without a claim name, a claim name with spaces
// or control characters (no authorizer's claim is named so), or a claim
// name on another kind.
func (k KeySource) Validate() error {
	switch k.Kind {
	case "", KeyFromHeader, KeyFromSourceIP:
		if k.Claim != "" {
			return fmt.Errorf("key source %q takes no claim name (%q)", k.Kind, k.Claim)
		}
		return nil
	case KeyFromClaim:
		if k.Claim == "" {
			return errors.New("key source claim has no claim name: claim:NAME")
		}
		if len(k.Claim) > 128 || strings.IndexFunc(k.Claim, func(r rune) bool { return r <= ' ' || r == 0x7f || unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return fmt.Errorf("claim name %q is not 1 to 128 bytes without spaces or control characters", k.Claim)
		}
		return nil
	}
	return fmt.Errorf("key source %q is not header, source-ip or claim", string(k.Kind))
}
