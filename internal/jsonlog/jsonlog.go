// Package jsonlog is a slog.Handler that writes the lines
// slog.NewJSONHandler(w, nil) writes, byte for byte, with less work for
// the records a server writes by the thousand: a request's line, whose
// values are strings, integers, booleans and a float. Such a record is
// encoded here, into a buffer of its own, without the JSON handler's
// reflection (which it uses for every float) or its attribute state; any
// other (a value of another kind, attributes or groups added with With)
// is handed to a JSONHandler on the same writer. Either way a record is
// one Write, under one lock.
package jsonlog

import (
	"context"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Handler writes JSON lines; see the package's doc.
type Handler struct {
	w    *lockedWriter
	json slog.Handler // for what this one does not encode itself
}

// New returns a Handler writing to w, as slog.NewJSONHandler(w, nil)
// would: records at INFO and above, without their source.
func New(w io.Writer) *Handler {
	lw := &lockedWriter{w: w}
	return &Handler{w: lw, json: slog.NewJSONHandler(lw, nil)}
}

// lockedWriter serializes the writes of a Handler and of the JSONHandler
// it hands records to.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Enabled reports whether level is INFO or above, as the JSON handler's.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.json.Enabled(ctx, level)
}

// WithAttrs is the JSON handler's, on the same writer.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.json.WithAttrs(attrs) }

// WithGroup is the JSON handler's, on the same writer.
func (h *Handler) WithGroup(name string) slog.Handler { return h.json.WithGroup(name) }

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// Handle writes r's line.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	bp := bufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 16<<10 {
			bufs.Put(bp)
		}
	}()
	b, ok := appendRecord((*bp)[:0], r)
	*bp = b
	if !ok {
		return h.json.Handle(ctx, r)
	}
	_, err := h.w.Write(b)
	return err
}

// appendRecord appends r's line as the JSON handler writes it, and
// reports false if r holds what only that handler encodes.
func appendRecord(b []byte, r slog.Record) ([]byte, bool) {
	if y := r.Time.Year(); r.Time.IsZero() || y < 0 || y >= 10000 {
		return b, false
	}
	b = append(b, `{"time":"`...)
	b = r.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":`...)
	b = appendString(b, r.Level.String())
	b = append(b, `,"msg":`...)
	b = appendString(b, r.Message)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		b, ok = appendAttr(b, a)
		return ok
	})
	return append(b, "}\n"...), ok
}

// appendAttr appends ,"key":value for a's kinds of value that need no
// reflection, and reports false for any other.
func appendAttr(b []byte, a slog.Attr) ([]byte, bool) {
	if a.Key == "" {
		return b, false // the JSON handler drops it, or inlines a group
	}
	b = appendString(append(b, ','), a.Key)
	b = append(b, ':')
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		return appendString(b, v.String()), true
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10), true
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10), true
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool()), true
	case slog.KindFloat64:
		// json.Marshal's format for the floats it writes in 'f' (others
		// are left to the JSON handler, which calls Marshal).
		f := v.Float64()
		if abs := math.Abs(f); math.IsNaN(f) || abs != 0 && (abs < 1e-6 || abs >= 1e21) {
			return b, false
		}
		return strconv.AppendFloat(b, f, 'f', -1, 64), true
	}
	return b, false
}

// appendString appends s quoted as the JSON handler quotes it: encoding/json's
// escapes without the HTML ones, bytes that are not UTF-8 as U+FFFD, and
// U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(append(b, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}

const hex = "0123456789abcdef"

// Cut cuts s, on a rune boundary, to what takes at most n bytes between
// the quotes of a line, as appendString (and so the JSON handler) writes
// it, and marks a cut with "…". It reports whether it cut. The bound is
// of the written form because escapes grow a value: a control character
// is written as 6 bytes (\u0001), a quote as 2.
func Cut(s string, n int) (string, bool) {
	if len(s)*len(`\u0000`) <= n {
		return s, false // no escape can take it past n
	}
	w := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if w += width(r, size); w > n {
			return s[:i] + "…", true
		}
		i += size
	}
	return s, false
}

// width is how many bytes appendString writes for rune r, read as size
// bytes of a string (FuzzCutMeasuresAsWritten holds it to appendString).
func width(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
		return len(`\ufffd`)
	case r == '"', r == '\\', r == '\n', r == '\r', r == '\t':
		return 2
	case r < 0x20:
		return len(`\u0000`)
	}
	return size
}
