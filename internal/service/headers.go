package service

import (
	"net/http"
	"strconv"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// setRateLimitHeaders writes the draft-ietf-httpapi-ratelimit-headers-11
// fields, one list member per policy, and their widely used X-RateLimit
// predecessors, which hold one policy: the enforced one with the fewest
// requests of this one's cost left (the latest reset among equals), its
// reset rounded up to whole seconds (resetAt). For each policy, q is its
// limit (the tier's in force, or an override's, if the key has one) and w
// its window, r what is
// left of it and t when it is whole again: a fixed or sliding window's end,
// or for GCRA, when the bucket has drained; with too little left for
// another request of the same cost, t is when one fits.
func setRateLimitHeaders(h http.Header, now time.Time, ds []limiter.Decision) {
	// Every decided request writes these: built by appending (not with
	// fmt, whose %q this is, strconv's quoting) into one buffer, made one
	// string, and cut into the five values, which is two allocations
	// where a buffer and a string each took ten.
	buf := make([]byte, 0, 128*len(ds)+64)
	var tightest *limiter.Decision
	var tightestAt int64
	for i := range ds {
		d := &ds[i]
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = strconv.AppendQuote(buf, d.Policy.Name)
		buf = strconv.AppendInt(append(buf, ";q="...), d.Policy.Limit, 10)
		buf = strconv.AppendInt(append(buf, ";w="...), decide.WindowSeconds(d.Policy), 10)
		// Ties go to the later reset as sent (resetAt), not the longer
		// ResetAfter: two waits that round to the same seconds may end
		// half a second apart, a fixed window's on the second, a GCRA
		// bucket's after it.
		at := resetAt(now, d)
		if tightest == nil || tightest.Policy.Shadow && !d.Policy.Shadow ||
			tightest.Policy.Shadow == d.Policy.Shadow && (requestsLeft(d) < requestsLeft(tightest) ||
				requestsLeft(d) == requestsLeft(tightest) && at > tightestAt) {
			tightest, tightestAt = d, at
		}
	}
	var ends [len(rateLimitFields)]int
	ends[0] = len(buf)
	for i := range ds {
		d := &ds[i]
		if i > 0 {
			buf = append(buf, ", "...)
		}
		buf = strconv.AppendQuote(buf, d.Policy.Name)
		buf = strconv.AppendInt(append(buf, ";r="...), d.Remaining, 10)
		buf = strconv.AppendInt(append(buf, ";t="...), int64(d.ResetAfter/time.Second), 10)
	}
	ends[1] = len(buf)
	for i, v := range [...]int64{tightest.Policy.Limit, tightest.Remaining, tightestAt} {
		buf = strconv.AppendInt(buf, v, 10)
		ends[2+i] = len(buf)
	}
	all := string(buf)
	vals := make([]string, len(rateLimitFields))
	from := 0
	for i, name := range rateLimitFields {
		vals[i] = all[from:ends[i]]
		from = ends[i]
		h[name] = vals[i : i+1 : i+1] // as h.Set, the names being canonical already
	}
}

// requestsLeft is how many more requests of this one's cost d's policy
// lets through: a policy of 10 that a request costs 4 of, with 2 left, has
// none, however many units it has.
func requestsLeft(d *limiter.Decision) int64 { return d.Remaining / max(d.Cost, 1) }

// resetAt is when d's wait ends, in Unix seconds: a window's end (a
// fixed window's, or a sliding one's with requests left), a whole second,
// exactly; a wait that ends between seconds (a sliding window's weight, a
// GCRA bucket), now+ResetAfter rounded up, so that a client that comes
// back then is never early (a truncated now, 0.6 s into its second, made
// it 0.6 s early).
func resetAt(now time.Time, d *limiter.Decision) int64 {
	switch at := now.Add(d.ResetAfter); {
	case d.Policy.Algorithm == limiter.Sliding && d.Allowed && d.Remaining >= max(d.Cost, 1) && !d.Reset.IsZero():
		return d.Reset.Unix() // its wait is the window's end (decide.Usage)
	case d.Policy.Algorithm != limiter.Sliding && d.Policy.Algorithm != limiter.GCRA, at.Nanosecond() == 0:
		return at.Unix() // a fixed window's end, or a whole second
	default:
		return at.Unix() + 1
	}
}

// rateLimitFields are the names setRateLimitHeaders writes, in its order,
// in the canonical form of http.CanonicalHeaderKey (the "RateLimit" of the
// draft is sent as "Ratelimit", as h.Set would send it: field names are
// case-insensitive).
var rateLimitFields = [...]string{"Ratelimit-Policy", "Ratelimit", "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset"}
