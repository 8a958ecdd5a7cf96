package limiter

import "fmt"

// FailMode is what a request gets when the store cannot decide it.
type FailMode string

// Fail modes: closed rejects with 503, open lets the request through.
const (
	FailClosed FailMode = "closed"
	FailOpen   FailMode = "open"
)

// Validate reports whether m is a fail mode: closed, open, or empty for
// closed.
func (m FailMode) Validate() error {
	switch m {
	case "", FailClosed, FailOpen:
		return nil
	}
	return fmt.Errorf("fail mode %q is not closed or open", string(m))
}
