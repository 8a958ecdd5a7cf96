package decide

import (
	"math"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// The sliding-window counter: the count at now is the current fixed
// window's count plus the previous window's, weighted by how much of the
// previous window a window ending now still covers. It assumes the
// previous window's attempts were spread evenly, and needs no rows beyond
// the ones a fixed window keeps.

// weighted is the sliding-window count at now.
func weighted(p limiter.Policy, now time.Time, cur, prev int64) float64 {
	elapsed := now.Sub(WindowStart(now, p.Window))
	return float64(prev)*(1-float64(elapsed)/float64(p.Window)) + float64(cur)
}

// MaxCount is the largest count the window containing now may reach, the
// attempt's cost included, for the attempt to be allowed, given the
// previous window's count (prev, used by sliding policies only). For a
// fixed window it is the limit; for a sliding one, the limit less the
// previous window's weight. A store that cannot run the policy's
// arithmetic inside its write (DynamoDB's condition expressions) turns it
// into a condition on the count.
func MaxCount(p limiter.Policy, now time.Time, prev int64) int64 {
	if p.Algorithm != limiter.Sliding {
		return p.Limit
	}
	return int64(math.Floor(float64(p.Limit) - weighted(p, now, 0, prev) + 1e-9))
}

// slidingWait is how long until one more attempt of cost would be allowed,
// if no other came: later in this window, as the previous window's weight
// fades, or in the next, as this window's does.
func slidingWait(p limiter.Policy, now time.Time, cur, prev, cost int64) time.Duration {
	w := float64(p.Window)
	start := WindowStart(now, p.Window)
	elapsed := float64(now.Sub(start))
	room := float64(p.Limit - cost) // what the others may weigh for one more to fit
	var at float64                  // nanoseconds from start
	switch {
	case float64(cur) <= room && prev > 0:
		// prev*(1 - t/w) + cur <= room, within this window.
		at = w * (1 - (room-float64(cur))/float64(prev))
	case float64(cur) <= room:
		at = elapsed
	default:
		// In the next window: cur*(1 - t/w) <= room.
		at = w
		if cur > 0 {
			at += w * max(1-room/float64(cur), 0)
		}
	}
	return wholeSeconds(time.Duration(at - elapsed))
}
