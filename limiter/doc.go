// Package limiter decides whether a client may make a request under one or
// more rate limit policies, and defines the store that keeps the counters.
//
// A Policy allows Limit requests per Window for each client key, in fixed
// windows (the design note's), sliding windows or as a GCRA token bucket;
// a request may count as several (its cost), and a policy may have usage
// plans, Tiers, whose limit a request gets by naming one (Charge.Tier: the
// key's count is the same whatever its tier). Time is cut into windows that
// start at whole multiples of the window length since the Unix epoch
// (window_start = unix - unix % window), so every process that shares a
// store agrees on the window without talking to the others. Each attempt
// adds its cost to the counter of its (key, window) pair under every
// policy that applies, in one transaction; it is allowed while every
// enforced policy's counter, including it, is within its limit. Rejected
// attempts are counted too, so a stored count is the number of attempts,
// not the number of allowed requests (the design note's semantics); a GCRA
// bucket, whose state is one instant, moves only for what it lets
// through. Every allowed request leaves exactly one audit record, written
// in the same transaction, and a rejected one leaves none.
//
// A fixed window lets a client through up to twice its limit across a window
// edge: Limit requests in the last second of one window and Limit more in the
// first second of the next. That is the price of one counter row per key and
// window; Sliding weighs the previous window to smooth the edge, and GCRA
// spaces requests out with a burst allowance.
//
// Configurations are checked before they count anything: Policy.Validate
// and ValidateRules refuse policies that would share counters or whose
// arithmetic would overflow, and a request that could never pass (a cost
// beyond a policy's Capacity) is refused with a *RequestError, counting
// nothing. Limiter is the decision for Go callers; Store is what keeps the
// counters: limiter/sqlite (one file, or shards, on EFS), limiter/dynamodb,
// and limiter/memory (one process, for tests and single servers).
//
// The package reads no clock and imports nothing from HTTP or AWS: every
// method that depends on time takes the instant, read once per request by
// the caller. limiter/httpapi guards an http.Handler with it, and
// limiter/awslambda runs that handler on Lambda behind API Gateway.
package limiter
