package service

import "strconv"

// A jsonAppender appends its own JSON, exactly as json.Marshal would
// write it, without reflection: /ping answers every decided request
// with one. It reports false when it cannot (a string Marshal would
// escape), and the caller marshals instead.
type jsonAppender interface {
	appendJSON(dst []byte) ([]byte, bool)
}

var _ jsonAppender = pingBody{}

// appendJSON is b as json.Marshal writes it, for a body of one policy.
func (b pingBody) appendJSON(dst []byte) ([]byte, bool) {
	if len(b.Policies) > 0 {
		return dst, false
	}
	u := b.usageBody
	if !plainJSON(u.Key) || !plainJSON(u.WindowStart) || !plainJSON(u.Tier) {
		return dst, false
	}
	dst = append(append(append(dst, `{"key":"`...), u.Key...), `","count":`...)
	dst = strconv.AppendInt(dst, u.Count, 10)
	dst = strconv.AppendInt(append(dst, `,"limit":`...), u.Limit, 10)
	dst = strconv.AppendInt(append(dst, `,"remaining":`...), u.Remaining, 10)
	dst = append(append(append(dst, `,"window_start":"`...), u.WindowStart...), `","reset_seconds":`...)
	dst = strconv.AppendInt(dst, u.ResetSeconds, 10)
	if u.Burst != 0 {
		dst = strconv.AppendInt(append(dst, `,"burst":`...), u.Burst, 10)
	}
	if u.Tier != "" {
		dst = append(append(append(dst, `,"tier":"`...), u.Tier...), '"')
	}
	return append(dst, '}'), true
}

// plainJSON reports whether json.Marshal writes s as it is, between
// quotes: printable ASCII but for the quote, the backslash and the
// characters it escapes for HTML (<, >, &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
