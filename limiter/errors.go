package limiter

import (
	"errors"
	"fmt"
)

// Errors a request is refused with, before anything is counted. Each
// comes as a *RequestError, which says what is wrong, and matches its kind
// with errors.Is.
var (
	ErrInvalidKey    = errors.New("invalid client key")
	ErrInvalidCost   = errors.New("invalid cost")
	ErrUnknownPolicy = errors.New("no such policy")
	ErrPolicyTwice   = errors.New("a policy is named twice")
)

// ErrInvalidPolicies is the error of every check of a Limiter that has no
// Store, or whose Policies are not one valid configuration: none, a
// policy that is not valid (Policy.Validate), two with one name or one
// namespace, or more than 32.
var ErrInvalidPolicies = errors.New("invalid policies")

// ErrUnavailable marks store failures that may clear by themselves: the file
// or its directory is missing or read-only, the lock was not granted in time,
// an I/O error. Callers answer them with their fail mode.
var ErrUnavailable = errors.New("store unavailable")

// A RequestError is why a request cannot be counted: its kind, one of
// ErrInvalidKey, ErrInvalidCost, ErrUnknownPolicy and ErrPolicyTwice, and
// what is wrong, in words a client can be shown.
type RequestError struct {
	Kind   error
	Reason string // e.g. `4 is more than policy "tokens" can ever let through at once, 3`
}

func (e *RequestError) Error() string { return e.Kind.Error() + ": " + e.Reason }

// Unwrap is the error's kind, for errors.Is.
func (e *RequestError) Unwrap() error { return e.Kind }

// refuse is a *RequestError of kind with its reason.
func refuse(kind error, format string, args ...any) error {
	return &RequestError{Kind: kind, Reason: fmt.Sprintf(format, args...)}
}
