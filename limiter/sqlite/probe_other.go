//go:build !unix

package sqlite

import (
	"errors"
	"sync/atomic"
)

// probe is unavailable without POSIX record locks; the store then polls
// with SQLite's own lock (see wait.go).
type probe struct{}

func openProbe(string, *atomic.Int64) (*probe, error) {
	return nil, errors.New("lock probe needs POSIX record locks")
}
func (*probe) close()              {}
func (*probe) writerActive() bool  { return true }
func (*probe) othersWaiting() bool { return false }
func (*probe) enter()              {}
func (*probe) leave()              {}
