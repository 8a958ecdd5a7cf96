// Package memory keeps the limiter's counters, GCRA buckets, overrides and
// audit records in the memory of one process: for tests, examples and a
// server that is the only process deciding for its keys.
//
// It counts per process. Within the process every decision is exact: one
// mutex serializes them, so no increment is lost and an allowed attempt
// has exactly one audit record, however many goroutines decide at once.
// Two processes, though, each count in their own memory and know nothing
// of the other's: a client whose requests are spread over n of them is let
// through up to n times its limit. A Lambda function runs in execution
// environments that are each such a process, as many as the traffic asks
// for, each recycled at will with its counts, and so the Lambda functions
// refuse this store: they count in SQLite on a shared file system or in
// DynamoDB.
//
// Nothing outlives the process, or Close: a restart starts every key
// fresh, and forgets every override and audit record. Until then the store
// forgets by itself what can no longer matter, as Prune deletes it from
// the other stores: at most once a minute of its decisions' clock (the
// earliest of the last three decisions' instants, so that one or two far
// ahead forget nothing live), and once an eighth as many decisions as it
// holds counters have been made, a decision sweeps the counters whose
// window ended a window ago (the longest window counted in their
// namespace), their audit records and the GCRA buckets that have drained.
// It holds what its keys counted in the last two lengths of each window
// (a day's requests for a daily policy), not every request it decided. A
// sweep walks all of it, holding the store's mutex: about 0.2 s for a
// million counters, once per 125,000 decisions or more. Prune is there
// too, for a caller that wants the audit records gone sooner.
//
// It decides as the other stores of this module do, from the same
// arithmetic (the fixed window, the sliding window, GCRA; costs, shadows
// and overrides), with the same semantics: every attempt counts under
// every window policy it names, denied ones too, up to a count that stops
// growing far above any limit; a GCRA bucket moves only for what it lets
// through; an attempt that the key's overrides make impossible is refused,
// counting nothing. Like them, it reads no clock: every instant is the
// caller's.
package memory
