package limiter

import "time"

// WindowLayout is how a window start is written in the store and in responses:
// UTC, whole seconds, a literal Z, so that windows sort as text.
const WindowLayout = "2006-01-02T15:04:05Z"

// WindowStart returns the start of the fixed window of length w that contains
// t: t truncated to a whole multiple of w seconds since the Unix epoch. Only
// whole seconds of w count; w must be at least one second.
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
