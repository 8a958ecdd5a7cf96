package jsonlog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// strs are strings that exercise every escape.
var strs = []string{"", "plain", `q"uote`, `back\slash`, "nl\ncr\rtab\t", "\x00\x01\x1f\x7f", "<b>&amp;</b>", "é中文🙂", "\u2028\u2029", "bad\xffutf8\xc3", "…", "\u200e"}

// records are what the tests log, by a function of a logger: each kind
// of value, every string above as a key and as a value, floats near the
// edges of json.Marshal's formats, and what is handed to the JSON handler.
func records() []func(*slog.Logger) {
	var out []func(*slog.Logger)
	for _, s := range strs {
		out = append(out, func(l *slog.Logger) { l.Info(s, s, s, "n", 1) })
	}
	for _, f := range []float64{0, math.Copysign(0, -1), 1.5, 0.001, 12.345, 1e-6, 9.99e-7, 1e20, 1e21, 123456789.125, -3.25, math.Inf(1), math.NaN()} {
		out = append(out, func(l *slog.Logger) { l.Info("f", "latency_ms", f) })
	}
	out = append(out,
		func(l *slog.Logger) {
			l.LogAttrs(context.Background(), slog.LevelWarn, "request", slog.String("method", "GET"), slog.Int("status", 200),
				slog.Int64("count", -7), slog.Uint64("u", math.MaxUint64), slog.Bool("from_memory", true), slog.Float64("latency_ms", 0.25))
		},
		func(l *slog.Logger) {
			l.Error("e", "error", errors.New("boom\n"), "d", time.Second, "t", time.Unix(0, 5).UTC())
		},
		func(l *slog.Logger) { l.Info("any", "list", []string{"a", "<b>"}, "map", map[string]any{"k": 1}) },
		func(l *slog.Logger) { l.Info("group", slog.Group("g", "a", 1), slog.Group("", "inl", 2), slog.Attr{}) },
		func(l *slog.Logger) { l.With("w", 1).WithGroup("grp").Info("with", "x", "y") },
		func(l *slog.Logger) { l.Log(context.Background(), slog.LevelInfo+2, "odd level") },
		func(l *slog.Logger) { l.Debug("dropped") },
	)
	return out
}

// Every record is written as slog.NewJSONHandler(w, nil) writes it, byte
// for byte, at a fixed clock.
func TestLinesAreJSONHandlers(t *testing.T) {
	at := time.Date(2026, 12, 2, 0, 59, 31, 181234567, time.UTC)
	for i, rec := range records() {
		var got, want bytes.Buffer
		rec(slog.New(fixed{New(&got), at}))
		rec(slog.New(fixed{slog.NewJSONHandler(&want, nil), at}))
		if got.String() != want.String() {
			t.Errorf("record %d:\n got %s\nwant %s", i, got.Bytes(), want.Bytes())
		}
	}
}

// A record of a time outside what RFC 3339 writes goes to the JSON handler.
func TestOddTimesAreJSONHandlers(t *testing.T) {
	for _, at := range []time.Time{{}, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))} {
		var got, want bytes.Buffer
		slog.New(fixed{New(&got), at}).Info("t", "k", "v")
		slog.New(fixed{slog.NewJSONHandler(&want, nil), at}).Info("t", "k", "v")
		if got.String() != want.String() {
			t.Errorf("at %v:\n got %s\nwant %s", at, got.Bytes(), want.Bytes())
		}
	}
}

// FuzzLineIsJSONHandlers checks any key, value and float against the JSON
// handler. Fuzz it for real with:
//
//	go test -run='^$' -fuzz=FuzzLineIsJSONHandlers -fuzztime=60s ./internal/jsonlog/
func FuzzLineIsJSONHandlers(f *testing.F) {
	for _, s := range strs {
		f.Add(s, s, 1.5)
	}
	at := time.Date(2026, 12, 2, 0, 0, 0, 1, time.UTC)
	f.Fuzz(func(t *testing.T, k, v string, x float64) {
		var got, want bytes.Buffer
		slog.New(fixed{New(&got), at}).Info(v, k, v, "x", x)
		slog.New(fixed{slog.NewJSONHandler(&want, nil), at}).Info(v, k, v, "x", x)
		if got.String() != want.String() {
			t.Errorf("got %s\nwant %s", got.Bytes(), want.Bytes())
		}
	})
}

// FuzzCutMeasuresAsWritten: what Cut keeps of any string takes at most n
// bytes as appendString writes it, and one rune more would take more; a
// string within n is kept whole.
//
//	go test -run='^$' -fuzz=FuzzCutMeasuresAsWritten -fuzztime=60s ./internal/jsonlog/
func FuzzCutMeasuresAsWritten(f *testing.F) {
	for _, s := range strs {
		f.Add(s, 8)
	}
	f.Add(strings.Repeat("\x01", 300), 1024)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<12 {
			return
		}
		written := func(s string) int { return len(appendString(nil, s)) - 2 }
		got, cut := Cut(s, n)
		if !cut {
			if got != s || written(s) > n {
				t.Fatalf("Cut(%q, %d) = %q, not cut, but it writes as %d bytes", s, n, got, written(s))
			}
			return
		}
		kept, ok := strings.CutSuffix(got, "…")
		if !ok || !strings.HasPrefix(s, kept) || written(kept) > n {
			t.Fatalf("Cut(%q, %d) = %q: not a prefix within %d bytes as written (%d)", s, n, got, n, written(kept))
		}
		_, size := utf8.DecodeRuneInString(s[len(kept):])
		if written(s[:len(kept)+size]) <= n {
			t.Fatalf("Cut(%q, %d) = %q: one rune more still fits", s, n, got)
		}
	})
}

// fixed sets every record's time, so that two handlers' lines compare.
type fixed struct {
	slog.Handler
	at time.Time
}

func (f fixed) Handle(ctx context.Context, r slog.Record) error {
	r.Time = f.at
	return f.Handler.Handle(ctx, r)
}

func (f fixed) WithAttrs(a []slog.Attr) slog.Handler { return fixed{f.Handler.WithAttrs(a), f.at} }
func (f fixed) WithGroup(n string) slog.Handler      { return fixed{f.Handler.WithGroup(n), f.at} }
