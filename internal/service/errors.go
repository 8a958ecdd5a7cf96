package service

import (
	"errors"
	"net/http"
	"time"

	"github.com/ft251/ratelimit/internal/decide"
	"github.com/ft251/ratelimit/limiter"
)

// refusals is the one table from the domain's errors to answers, in the
// manner of wtf's ErrorStatusCode: the kinds of limiter.RequestError a
// request is refused with before anything is counted, each with its
// status, problem type and detail, which says the error's Reason. Errors
// are matched by their type and kind, never by their text.
var refusals = map[error]struct {
	status int
	typ    string
	detail func(reason string) string
}{
	limiter.ErrInvalidKey: {http.StatusBadRequest, TypeInvalidKey, func(why string) string {
		return "The client key is not acceptable: " + why + ". Keys are 1 to 256 bytes of UTF-8 without control characters or U+FFFD."
	}},
	limiter.ErrInvalidCost:   {http.StatusBadRequest, TypeInvalidRequest, func(why string) string { return "The request's cost " + why + "." }},
	limiter.ErrUnknownPolicy: {http.StatusBadRequest, TypeInvalidRequest, func(why string) string { return "The check is not acceptable: no such policy: " + why + "." }},
	limiter.ErrPolicyTwice:   {http.StatusBadRequest, TypeInvalidRequest, func(why string) string { return "The check is not acceptable: a policy is named twice: " + why + "." }},
}

// refusal is the problem a refused request is answered with, or nil when
// err is no refusal: a *Problem as it is, or a refusals entry.
func refusal(err error) *Problem {
	if err == nil {
		return nil // every decided request: errors.As would allocate its target
	}
	if p := (*Problem)(nil); errors.As(err, &p) {
		return p
	}
	if errors.Is(err, decide.ErrInstant) {
		// The clock is wrong: not the client's fault, nor the store's
		// (a fail mode would let every request through uncounted).
		return problem(http.StatusInternalServerError, TypeBlank, "The server could not handle the request.")
	}
	var re *limiter.RequestError
	if errors.As(err, &re) {
		if r, ok := refusals[re.Kind]; ok {
			return problem(r.status, r.typ, r.detail(re.Reason))
		}
	}
	return nil
}

// problemOf is the answer to err, a request's failure: its refusal; else
// a store's failure (any other error reaching here comes from the store),
// answered 503 with a Retry-After of StoreRetryAfter, at most window, the
// request's shortest policy window (a client is not told to wait past the
// window that would let it in again). A nil window means StoreRetryAfter.
func problemOf(err error, window time.Duration) *Problem {
	if p := refusal(err); p != nil {
		return p
	}
	if window <= 0 {
		window = StoreRetryAfter
	}
	return storeUnavailable(window)
}
