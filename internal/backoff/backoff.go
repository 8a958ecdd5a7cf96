// Package backoff is how the stores wait between tries.
package backoff

import (
	"context"
	"time"
)

// Sleep pauses for d, or until ctx is done, whichever comes first, and
// returns ctx's error in the second case, so that a request's deadline
// always ends a wait.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
