package backoff_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ft251/ratelimit/internal/backoff"
)

// A request's deadline ends a store's wait at once, not after the pause.
func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backoff.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a done context = %v, want context.Canceled", err)
	}
	if err := backoff.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil after the pause", err)
	}
	if err := backoff.Sleep(ctx, -time.Second); err != nil {
		t.Fatalf("Sleep for no time = %v, want nil: nothing to wait for", err)
	}
}
