package decide

import (
	"log/slog"
	"strings"
	"time"

	"github.com/ft251/ratelimit/limiter"
)

// WindowLayout is how a window start is written in the store and in
// responses: UTC, whole seconds, a literal Z, so that windows sort as text.
const WindowLayout = "2006-01-02T15:04:05Z"

// CalledAtLayout is how an audit record's time is written: UTC with
// milliseconds, fixed width so that it sorts as text.
const CalledAtLayout = "2006-01-02T15:04:05.000Z"

// CountCap is where a stored count stops growing: the windows count every
// attempt, denied ones too, and a client denied long enough at a large
// cost would otherwise overflow the counter. A count this high denies
// under any limit (limiter.MaxLimit is far below it).
const CountCap = 1 << 62

// WindowStart returns the start of the fixed window of length w that
// contains t: t truncated to a whole multiple of w seconds since the Unix
// epoch. Only whole seconds of w count; w must be at least one second.
func WindowStart(t time.Time, w time.Duration) time.Time {
	secs := int64(w / time.Second)
	u := t.Unix()
	start := u - u%secs
	if u%secs < 0 { // before 1970 the remainder is negative; floor, not truncate
		start -= secs
	}
	return time.Unix(start, 0).UTC()
}

// FormatWindow writes a window start as the store keeps it.
func FormatWindow(t time.Time) string { return t.UTC().Format(WindowLayout) }

// WindowSeconds is p's window length in whole seconds.
func WindowSeconds(p limiter.Policy) int64 { return int64(p.Window / time.Second) }

// StoreKey returns the key under which the store keeps key's counters for
// p: the key exactly, without a namespace; else the namespace, a unit
// separator (U+001F) and the key. limiter.ValidKey rejects control
// characters, so no client key can collide with a namespaced one.
func StoreKey(p limiter.Policy, key string) string {
	if p.Namespace == "" {
		return key
	}
	return p.Namespace + keySep + key
}

// keySep separates a store key's namespace from its client key.
const keySep = "\x1f"

// NamespaceOf is the namespace of a store key StoreKey made: empty for a
// client key alone.
func NamespaceOf(storeKey string) string {
	ns, _, ok := strings.Cut(storeKey, keySep)
	if !ok {
		return ""
	}
	return ns
}

// AuditBefore is the audit cutoff at now for a retention: audit records
// made before it may be deleted. Zero retention keeps them forever and
// gives the zero time, which Prune reads as "keep".
func AuditBefore(now time.Time, retention time.Duration) time.Time {
	if retention <= 0 {
		return time.Time{}
	}
	return now.Add(-retention)
}

// Units is c's cost: Cost, or 1 when it is not set.
func Units(c limiter.Charge) int64 { return max(c.Cost, 1) }

// PruneLevel is the level at which to log a prune that reported p and failed
// with err: error when it failed, info when it deleted something, and debug
// when it deleted nothing, so that a schedule that mostly finds nothing to
// do (every minute, say) does not fill the logs with lines that say so.
func PruneLevel(p limiter.Pruned, err error) slog.Level {
	switch {
	case err != nil:
		return slog.LevelError
	case p == limiter.Pruned{}:
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
