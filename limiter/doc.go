// Package limiter decides whether a client may make a request under a
// fixed-window rate limit, and defines the store that keeps the counters.
//
// A policy allows Limit requests per Window for each client key. Time is cut
// into windows that start at whole multiples of the window length since the
// Unix epoch (window_start = unix - unix % window), so every process that
// shares a store agrees on the window without talking to the others. Each
// attempt increments the counter of its (key, window) pair; the attempt is
// allowed while the counter, including it, is at most Limit. Rejected attempts
// are counted too, so a stored count is the number of attempts, not the number
// of allowed requests (the design note's semantics). Every allowed request
// leaves exactly one audit record, written in the same transaction as the
// increment, and a rejected one leaves none.
//
// A fixed window lets a client through up to twice its limit across a window
// edge: Limit requests in the last second of one window and Limit more in the
// first second of the next. That is the price of one counter row per key and
// window; callers who need smoother limits want a sliding window.
//
// The package reads no clock and imports nothing from AWS: every method that
// depends on time takes the instant, read once per request by the caller, and
// the stores live in subpackages (limiter/sqlite), the HTTP contract in
// limiter/httpapi, and the Lambda wiring in limiter/awslambda.
package limiter
