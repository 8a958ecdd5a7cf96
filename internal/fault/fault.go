// Package fault classes store failures, for logs, metrics and alarms:
// whether a failure may clear by itself, and if not, what an operator must
// do. The stores class what they return (Failed); the HTTP layer reads the
// class (Of) and answers, logs and measures by it. Callers outside this
// module see only limiter.ErrUnavailable, which the transient classes
// match.
package fault

import (
	"errors"
	"fmt"

	"github.com/ft251/ratelimit/limiter"
)

// Class is the class of a store failure.
type Class string

// Classes a store reports. The first two may clear by themselves
// (Transient); the others will not, and need an operator.
const (
	// Busy: the lock was not granted (SQLite), or the writes were
	// throttled or kept conflicting (DynamoDB), within the budget or the
	// request's deadline.
	Busy Class = "busy"
	// Unavailable: the data cannot be reached now: a file or directory
	// missing or read-only, a full disk, an I/O or network error, a table
	// that does not exist or credentials it refuses.
	Unavailable Class = "unavailable"
	// Corrupt: the file is not a database, or is damaged.
	Corrupt Class = "corrupt"
	// Schema: the data was written by a newer binary, or in a layout this
	// process is not configured for.
	Schema Class = "schema"
	// JournalMode: the database is in another journal mode than the one
	// configured, and would not be switched back (a process in WAL mode on
	// a file the functions share, say).
	JournalMode Class = "journal_mode"
)

// Transient reports whether a failure of class c may clear by itself.
func (c Class) Transient() bool { return c == Busy || c == Unavailable }

// Error is a store failure with its class. Errors of a transient class
// match limiter.ErrUnavailable with errors.Is.
type Error struct {
	Class Class
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }

// Unwrap gives errors.Is and errors.As the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is makes a transient Error a limiter.ErrUnavailable.
func (e *Error) Is(target error) bool {
	return target == limiter.ErrUnavailable && e.Class.Transient()
}

// Failed returns an error of class c, with its context.
func Failed(c Class, format string, args ...any) error {
	return &Error{Class: c, Err: fmt.Errorf(format, args...)}
}

// Of is the class of a store error: the class it was given, or Unavailable
// for one that has none (a deadline that ran out, say).
func Of(err error) Class {
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	return Unavailable
}
