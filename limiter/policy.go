package limiter

import (
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Algorithm is how a policy counts.
type Algorithm string

// Algorithms a policy can count with. The zero value counts as Fixed.
const (
	// Fixed counts attempts in fixed windows: up to Limit per window, and
	// so up to twice that across a window edge.
	Fixed Algorithm = "fixed"
	// Sliding weighs the previous fixed window's count by how much of it a
	// window ending now would still cover, and adds the current window's:
	// count = previous * (1 - elapsed/window) + current. It smooths the
	// edge, from the same rows the fixed window keeps.
	Sliding Algorithm = "sliding"
	// GCRA is the generic cell rate algorithm, a token bucket kept as one
	// instant per key: Limit requests per Window sustained, one every
	// Window/Limit, and at most Burst at once. A denied attempt leaves the
	// bucket as it was.
	GCRA Algorithm = "gcra"
)

// String is the algorithm's name as headers, bodies and logs write it:
// "fixed" for the zero value too.
func (a Algorithm) String() string {
	if a == "" {
		return string(Fixed)
	}
	return string(a)
}

// Policy is one rate limit: at most Limit attempts per key per Window.
type Policy struct {
	// Name identifies the policy in response headers (RateLimit-Policy).
	Name string
	// Limit is the number of requests allowed per key and window.
	Limit int64
	// Window is the window length, a whole number of seconds.
	Window time.Duration
	// Namespace keeps this policy's counters apart from other policies' in a
	// shared store. Empty means the stored key is the client key exactly, as
	// the design note's layout has it; at most one policy per store may
	// leave it empty, and no two may share one (ValidateRules and a
	// Limiter refuse both, and so does a second Limit, Middleware or
	// Limiter of the process on the same store; POLICIES uses each
	// policy's name, and none for "ping").
	Namespace string
	// Algorithm is Fixed (the default, also when empty), Sliding or GCRA.
	Algorithm Algorithm
	// Burst is, for GCRA, how many requests may pass at once; zero means
	// Limit. Other algorithms ignore it.
	Burst int64
	// Shadow policies count and report, but never reject: for rolling a new
	// limit out. Their would-be rejections are logged and measured.
	Shadow bool
	// Tiers are the policy's usage plans, by name: a request that names
	// one (Charge.Tier) is judged by its limit and burst; one that names
	// none, or a name not listed, by the policy's own, the default tier.
	// Counts are per key whatever the tier. At most 16; see Tier.
	Tiers map[string]Tier
}

// Capacity is the most one attempt may cost and still pass: for GCRA, how
// many requests may pass at once (Burst, or Limit when Burst is not set);
// for the windows, Limit.
func (p Policy) Capacity() int64 {
	if p.Burst > 0 {
		return p.Burst
	}
	return p.Limit
}

// maxBurst bounds a GCRA policy's burst, so that its arithmetic in
// nanoseconds cannot overflow: a burst of a billion requests at one instant
// is no limit at all.
const maxBurst = 1_000_000_000

// maxTolerance bounds a GCRA policy's tolerance, Capacity() times its
// emission interval (Window / Limit): how far ahead of now a bucket's TAT
// may run. A century keeps every instant the arithmetic reaches inside an
// int64 of nanoseconds.
const maxTolerance = 100 * 365 * 24 * time.Hour

// MaxWindow is the longest window a policy may have.
const MaxWindow = 30 * 24 * time.Hour

// MaxLimit is the largest limit a policy may have, fifteen nines: any
// count a store adds up to stays far inside an int64, and a float64 holds
// every count exactly, for the sliding window's weighing.
const MaxLimit = 999_999_999_999_999

// maxNamespaceBytes bounds a namespace, which prefixes every stored key of
// its policy.
const maxNamespaceBytes = 64

// maxPolicyNameBytes bounds a policy's name, as maxTierNameBytes a tier's.
const maxPolicyNameBytes = 64

// maxPolicies is how many policies one configuration may hold: one
// decision counts under all of a request's policies in one transaction,
// and DynamoDB's holds 100 items.
const maxPolicies = 32

// Validate reports what is wrong with p, or nil: its name, limit,
// window, algorithm, burst and namespace, and each of its tiers (Tier).
func (p Policy) Validate() error {
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("policy name is empty"))
	}
	errs = append(errs, p.limitErrors(fmt.Sprintf("policy %q", p.Name))...)
	if p.Window < time.Second || p.Window > MaxWindow || p.Window%time.Second != 0 {
		errs = append(errs, fmt.Errorf("policy %q: window %v is not a whole number of seconds between 1s and %v", p.Name, p.Window, MaxWindow))
	}
	switch p.Algorithm {
	case "", Fixed, Sliding, GCRA:
	default:
		errs = append(errs, fmt.Errorf("policy %q: algorithm %q is not fixed, sliding or gcra", p.Name, string(p.Algorithm)))
	}
	if p.Namespace != "" && !(p.Namespace == p.Name && len(p.Name) > maxPolicyNameBytes) { // a name too long is said once, below
		if err := ValidKey(p.Namespace); err != nil || len(p.Namespace) > maxNamespaceBytes {
			errs = append(errs, fmt.Errorf("policy %q: namespace %q is not 1 to %d bytes of UTF-8 without control characters", p.Name, p.Namespace, maxNamespaceBytes))
		}
	}
	switch {
	case len(p.Name) > maxPolicyNameBytes:
		// Every response's RateLimit-Policy repeats it, and so do 429s,
		// log lines and metrics.
		n := 16
		for !utf8.RuneStart(p.Name[n]) {
			n--
		}
		errs = append(errs, fmt.Errorf("policy %q…: a name of %d bytes: names are 1 to %d", p.Name[:n], len(p.Name), maxPolicyNameBytes))
	case !validName(p.Name):
		// It is written into headers as a structured-field string.
		errs = append(errs, fmt.Errorf("policy %q: names are lower-case letters, digits, '-', '_' and '.'", p.Name))
	}
	errs = append(errs, p.tierErrors()...)
	return errors.Join(errs...)
}

// validName reports whether name is lower-case letters, digits, '-', '_'
// and '.' only, as policy and tier names are.
func validName(name string) bool {
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// limitErrors are what is wrong with p's limit and burst, which a tier or
// an override replaces, each error starting with who.
func (p Policy) limitErrors(who string) []error {
	var errs []error
	if p.Limit < 1 || p.Limit > MaxLimit {
		errs = append(errs, fmt.Errorf("%s: limit %d is not from 1 to %d", who, p.Limit, int64(MaxLimit)))
	}
	switch p.Algorithm {
	case "", Fixed, Sliding:
		if p.Burst != 0 {
			errs = append(errs, fmt.Errorf("%s: burst applies to the gcra algorithm only", who))
		}
	case GCRA:
		errs = append(errs, p.validateGCRA(who)...)
	}
	return errs
}

func (p Policy) validateGCRA(who string) []error {
	var errs []error
	if p.Limit > 0 && p.Window/time.Duration(p.Limit) < time.Microsecond {
		errs = append(errs, fmt.Errorf("%s: a gcra limit of %d per %v lets a request through more often than every microsecond", who, p.Limit, p.Window))
	}
	switch {
	case p.Burst < 0 || p.Burst > maxBurst:
		errs = append(errs, fmt.Errorf("%s: burst %d is not from 1 to %d", who, p.Burst, maxBurst))
	case p.Burst == 0 && p.Limit > maxBurst:
		errs = append(errs, fmt.Errorf("%s: with no burst set, the burst is the limit, %d, more than %d: set a burst", who, p.Limit, maxBurst))
	case p.Limit > 0 && p.Capacity() > int64(maxTolerance/max(p.Window/time.Duration(p.Limit), 1)):
		errs = append(errs, fmt.Errorf("%s: a burst of %d every %v would take more than a century to drain", who, p.Capacity(), p.Window/time.Duration(p.Limit)))
	}
	return errs
}
