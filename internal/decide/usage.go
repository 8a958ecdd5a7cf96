package decide

import (
	"math"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// Usage computes where key stands at now under p, given what the store
// read: the count of the window containing now and, for a sliding policy,
// of the window before it, or a GCRA policy's TAT.
func Usage(p limiter.Policy, key string, now time.Time, st State) limiter.Usage {
	if p.Algorithm == limiter.GCRA {
		return unrescaled(gcraUsage(p, key, now, bucket(p, now, st)), p, now, st, 1)
	}
	cur, prev := st.Cur, st.Prev
	start := WindowStart(now, p.Window)
	reset := start.Add(p.Window)
	u := limiter.Usage{Policy: p, Key: key, WindowStart: start, Reset: reset, ResetAfter: wholeSeconds(reset.Sub(now))}
	if p.Algorithm != limiter.Sliding {
		u.Count = cur
		u.Remaining = max(p.Limit-cur, 0)
		return u
	}
	u.Count = int64(math.Ceil(weighted(p, now, cur, prev) - 1e-9))
	u.Remaining = max(p.Limit-u.Count, 0)
	if u.Remaining == 0 {
		u.ResetAfter = slidingWait(p, now, cur, prev, 1)
	}
	return u
}

// wholeSeconds rounds d up to whole seconds, at least one: a wait of "0"
// would invite an immediate retry.
func wholeSeconds(d time.Duration) time.Duration {
	return max(time.Duration(math.Ceil(d.Seconds()))*time.Second, time.Second)
}
