package limiter

import (
	"fmt"
	"strings"
)

// KeyKind is where a request's client key comes from.
type KeyKind string

// Kinds of KeySource.
const (
	// KeyFromHeader reads the X-Client-Key header, which any client can set.
	KeyFromHeader KeyKind = "header"
	// KeyFromSourceIP is the address the platform saw the request come from.
	KeyFromSourceIP KeyKind = "source-ip"
	// KeyFromClaim is a claim of the JWT authorizer in front of the API.
	KeyFromClaim KeyKind = "claim"
)

// KeySource says how a request's client key is found.
type KeySource struct {
	Kind KeyKind
	// Claim names the JWT claim when Kind is KeyFromClaim.
	Claim string
}

// String writes k as CLIENT_KEY_SOURCE spells it.
func (k KeySource) String() string {
	if k.Kind == KeyFromClaim {
		return string(KeyFromClaim) + ":" + k.Claim
	}
	return string(k.Kind)
}

// ParseKeySource reads "header", "source-ip" or "claim:NAME".
func ParseKeySource(s string) (KeySource, error) {
	switch claim, isClaim := strings.CutPrefix(s, string(KeyFromClaim)+":"); {
	case s == string(KeyFromHeader) || s == string(KeyFromSourceIP):
		return KeySource{Kind: KeyKind(s)}, nil
	case isClaim && claim != "":
		return KeySource{Kind: KeyFromClaim, Claim: claim}, nil
	}
	return KeySource{}, fmt.Errorf("%q is not header, source-ip or claim:NAME", s)
}
