package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// refusals: a store refuses, before it reads or writes anything, what no
// request the service sends could hold, for a program that calls it
// directly: a key that is not a client key (empty, over 256 bytes, a
// control character, bytes that are not UTF-8) in every call that names
// one; an instant outside 1970 to 2160, beyond which a GCRA bucket's
// time, nanoseconds since 1970 that may run a century ahead, overflows (a
// zero time.Time from a clock left unset, the year 2300). Each used to be
// taken: the keys stored, GCRA's arithmetic overflowed.
func refusals(t *testing.T, h Harness) {
	in := h.New(t)
	ctx := context.Background()
	s := in.Store
	g := limiter.Policy{Name: "g", Limit: 2, Window: time.Minute, Algorithm: limiter.GCRA, Namespace: "g"}
	for _, key := range []string{"", strings.Repeat("k", 257), "a\x00b", "a\xffb"} {
		errs := map[string]error{}
		_, errs["Allow"] = s.Allow(ctx, One(ping, key, t0, "/ping", "r"))
		_, errs["Usage"] = s.Usage(ctx, ping, key, t0)
		_, errs["SetOverride"] = s.SetOverride(ctx, ping, key, limiter.Override{Limit: 5})
		_, errs["Override"] = s.Override(ctx, ping, key)
		_, errs["DeleteOverride"] = s.DeleteOverride(ctx, ping, key)
		errs["Reset"] = s.Reset(ctx, ping, key, t0)
		for call, err := range errs {
			if !errors.Is(err, limiter.ErrInvalidKey) {
				t.Errorf("%s with the key %q: %v, want ErrInvalidKey", call, key, err)
			}
		}
		if n, audit := in.Stored(t, ping, key, t0); n != 0 || len(audit) != 0 {
			t.Errorf("the key %q: %d counted, %d audited, want nothing", key, n, len(audit))
		}
	}
	for _, at := range []time.Time{{}, time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(2160, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		for _, p := range []limiter.Policy{ping, g} {
			if _, err := s.Allow(ctx, One(p, "k", at, "/ping", "r")); err == nil {
				t.Errorf("%s at %v: allowed, want refused", p.Name, at)
			}
			if _, err := s.Usage(ctx, p, "k", at); err == nil {
				t.Errorf("usage of %s at %v: no error, want refused", p.Name, at)
			}
			if err := s.Reset(ctx, p, "k", at); err == nil {
				t.Errorf("reset of %s at %v: no error, want refused", p.Name, at)
			}
		}
	}
	// The edges themselves are taken.
	for _, at := range []time.Time{time.Unix(0, 0), time.Date(2159, 12, 31, 23, 59, 0, 0, time.UTC)} {
		if o := attempt(t, s, One(g, "edge", at, "/ping", "r")); !o.Allowed {
			t.Errorf("gcra at %v: %+v, want allowed", at, o)
		}
	}
}
