// Package decide is how the stores decide an attempt: the arithmetic of the
// fixed window, the sliding window and GCRA, applied to what a store read
// of a key's counters inside the decision's transaction (a State), and
// what the store writes back (a GCRA bucket's new TAT). It also names how
// the stores key and write what they keep: store keys, window starts,
// audit times.
//
// It is internal: callers see limiter.Outcome, which Outcome.Public gives,
// and the stores are this module's. Everything here takes the instant of
// the request; nothing reads a clock.
package decide
