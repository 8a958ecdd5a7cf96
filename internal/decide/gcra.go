package decide

import (
	"math"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// GCRA, the generic cell rate algorithm, keeps one instant per key: its
// theoretical arrival time (TAT), when the bucket would be empty again had
// no request come since. Requests are emitted one every T = Window/Limit;
// the bucket holds Capacity() of them, a tolerance of tau = Capacity * T.
// An attempt of cost c at now is allowed when
//
//	max(TAT, now) + c*T - now <= tau
//
// and then TAT becomes max(TAT, now) + c*T. A denied attempt leaves TAT as
// it was: unlike the windows, which count every attempt, GCRA counts only
// what it lets through, so a client that keeps knocking is let in again as
// soon as its rate falls back under the limit. Time is in nanoseconds,
// with no rounding beyond T's.

// Emission is T, the interval at which a GCRA policy lets requests through
// at its sustained rate: Window / Limit.
func Emission(p limiter.Policy) time.Duration { return p.Window / time.Duration(p.Limit) }

// bucket is the TAT st holds, as p counts: a TAT written while the key's
// emission interval was another (an override set or removed since, a
// limit changed) holds that many emissions back, and is rescaled to hold
// as many of p's, at most a whole bucket. Without it, raising a key's
// limit would leave it waiting out the old, slower rate.
func bucket(p limiter.Policy, now time.Time, st State) time.Time {
	t := Emission(p)
	if st.Emission <= 0 || st.Emission == t || !st.TAT.After(now) {
		return st.TAT
	}
	owed := float64(st.TAT.Sub(now)) / float64(st.Emission) * float64(t)
	return now.Add(time.Duration(math.Round(min(owed, float64(p.Capacity())*float64(t)))))
}

// unrescaled is u, the standing of a bucket that bucket rescaled from st
// (a TAT written at another rate), with the wait it really has: until a
// request moves it, the TAT st holds drains at the rate it was written
// with, so the bucket is whole again at st.TAT, and an attempt of cost
// fits once st holds back at most Capacity - cost of its own emissions.
// Read at p's rate instead, the wait would be too short where the rate
// fell (a client told to come back in one emission is denied again) and
// too long where it rose. A bucket written at p's rate is u as it is.
func unrescaled(u limiter.Usage, p limiter.Policy, now time.Time, st State, cost int64) limiter.Usage {
	if st.Emission <= 0 || st.Emission == Emission(p) || !st.TAT.After(now) {
		return u
	}
	var n int64 // of st's emissions the bucket may still hold back
	if u.Remaining < cost && cost <= p.Capacity() {
		n = p.Capacity() - cost
	}
	owed := float64(st.TAT.Sub(now)) / float64(st.Emission)
	u.ResetAfter = wholeSeconds(time.Duration(max(owed-float64(n), 0) * float64(st.Emission)))
	u.Reset = now.Add(u.ResetAfter)
	return u
}

// gcraFits reports whether an attempt of cost at now fits a bucket whose
// TAT is tat, and the TAT it leaves if it is let through.
func gcraFits(p limiter.Policy, now, tat time.Time, cost int64) (bool, time.Time) {
	if cost > p.Capacity() {
		// Never fits, and cost*T could overflow: the policy's tolerance
		// is bounded, not cost.
		return false, tat
	}
	t := Emission(p)
	base := tat
	if base.Before(now) {
		base = now
	}
	next := base.Add(time.Duration(cost) * t)
	return next.Sub(now) <= time.Duration(p.Capacity())*t, next
}

// gcraUsage is where a key stands at now under a GCRA policy with TAT tat:
// Remaining is how many requests of cost 1 would pass now, Count is the
// rest of the bucket (Count + Remaining = Capacity), and ResetAfter is when
// the bucket is whole again, or, with nothing left, when the next request
// fits.
func gcraUsage(p limiter.Policy, key string, now, tat time.Time) limiter.Usage {
	t := Emission(p)
	owed := max(tat.Sub(now), 0) // what the bucket still holds back
	room := time.Duration(p.Capacity())*t - owed
	remaining := max(int64(room/t), 0)
	wait := owed
	if remaining == 0 {
		wait = t - room // when one more emission fits
	}
	start := WindowStart(now, p.Window)
	after := wholeSeconds(wait)
	return limiter.Usage{Policy: p, Key: key, Count: p.Capacity() - remaining, Remaining: remaining,
		WindowStart: start, Reset: now.Add(after), ResetAfter: after}
}

// gcraStanding is gcraUsage after an attempt of cost, with the bucket at
// tat: when what is left is less than the attempt cost, ResetAfter is when
// another attempt of that cost fits.
func gcraStanding(p limiter.Policy, key string, now, tat time.Time, cost int64) limiter.Usage {
	u := gcraUsage(p, key, now, tat)
	if u.Remaining < cost {
		t := Emission(p)
		base := tat
		if base.Before(now) {
			base = now
		}
		// A cost beyond the burst never fits; it is told the wait of a
		// bucket that is whole (stores refuse it before it gets here:
		// Impossible). Bounded by a second bucket, so that cost*T cannot
		// overflow.
		fitsAt := base.Add(time.Duration(min(cost, 2*p.Capacity())-p.Capacity()) * t)
		u.ResetAfter = wholeSeconds(fitsAt.Sub(now))
		u.Reset = now.Add(u.ResetAfter)
	}
	return u
}
