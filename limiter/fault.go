package limiter

import (
	"errors"
	"fmt"
)

// Fault is the class of a store failure, for logs, metrics and alarms:
// whether it may clear by itself, and if not, what an operator must do.
type Fault string

// Faults a store reports. The first two may clear by themselves
// (Transient); the others will not, and need an operator.
const (
	// FaultBusy: the lock was not granted (SQLite), or the writes were
	// throttled or kept conflicting (DynamoDB), within the budget or the
	// request's deadline.
	FaultBusy Fault = "busy"
	// FaultUnavailable: the data cannot be reached now: a file or
	// directory missing or read-only, a full disk, an I/O or network
	// error, a table that does not exist or credentials it refuses.
	FaultUnavailable Fault = "unavailable"
	// FaultCorrupt: the file is not a database, or is damaged.
	FaultCorrupt Fault = "corrupt"
	// FaultSchema: the data was written by a newer binary, or in a layout
	// this process is not configured for.
	FaultSchema Fault = "schema"
	// FaultJournalMode: the database is in another journal mode than the
	// one configured, and would not be switched back (a process in WAL
	// mode on a file the functions share, say).
	FaultJournalMode Fault = "journal_mode"
)

// Transient reports whether a failure of class f may clear by itself.
func (f Fault) Transient() bool { return f == FaultBusy || f == FaultUnavailable }

// StoreError is a store failure with its class. Errors of a transient
// class match ErrUnavailable with errors.Is.
type StoreError struct {
	Fault Fault
	Err   error
}

func (e *StoreError) Error() string { return e.Err.Error() }

// Unwrap gives errors.Is and errors.As the underlying error.
func (e *StoreError) Unwrap() error { return e.Err }

// Is makes a transient StoreError an ErrUnavailable.
func (e *StoreError) Is(target error) bool { return target == ErrUnavailable && e.Fault.Transient() }

// Failed returns err classed as f, with its context.
func Failed(f Fault, format string, args ...any) error {
	return &StoreError{Fault: f, Err: fmt.Errorf(format, args...)}
}

// FaultOf is the class of a store error: the class it was given, or
// FaultUnavailable for one that has none (a deadline that ran out, say).
func FaultOf(err error) Fault {
	var se *StoreError
	if errors.As(err, &se) {
		return se.Fault
	}
	return FaultUnavailable
}
