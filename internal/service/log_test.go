package service_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ft251/ratelimit/internal/service"
	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/metrics"
)

// maxLine bounds a log line whose request was 16 KiB of path or method:
// each cut at 1 KiB, and the rest.
const maxLine = 4 << 10

// loggedLine runs send and returns the one log line it wrote to logs,
// failing the test if it wrote another number of lines or one over maxLine.
func loggedLine(t *testing.T, logs *bytes.Buffer, send func()) map[string]any {
	t.Helper()
	logs.Reset()
	send()
	if n := strings.Count(logs.String(), "\n"); n != 1 {
		t.Fatalf("%d log lines, want 1: %.300s", n, logs)
	}
	if logs.Len() > maxLine {
		t.Errorf("a log line of %d bytes: %.200s…", logs.Len(), logs)
	}
	var m map[string]any
	if err := json.Unmarshal(logs.Bytes(), &m); err != nil {
		t.Fatalf("log line %.200s: %v", logs, err)
	}
	return m
}

// wantCut checks that field, sent as full (over 1 KiB), was logged as its
// first KiB, cut on a rune boundary and marked "…", with its full length
// in field_bytes.
func wantCut(t *testing.T, line map[string]any, field, full string) {
	t.Helper()
	got, _ := line[field].(string)
	cut, ok := strings.CutSuffix(got, "…")
	if !ok || len(cut) > 1024 || len(cut) <= 1024-utf8.UTFMax || !strings.HasPrefix(full, cut) || !utf8.ValidString(got) {
		t.Errorf("%s logged as %d bytes %.40q…, want the first KiB of the %d sent, on a rune boundary, then …", field, len(got), got, len(full))
	}
	if n := line[field+"_bytes"]; n != float64(len(full)) {
		t.Errorf("%s_bytes = %v, want the full length %d", field, n, len(full))
	}
}

// TestLogLinesAreBounded: a request of a 16 KiB path (or method) logs a
// line of a few KiB, not 16: the API's, the admin routes', the
// middleware's; the path cut at 1 KiB on a rune boundary, with its full
// length beside it. A path within the bound is logged whole, without a
// length. The EMF records carry patterns, never the path.
func TestLogLinesAreBounded(t *testing.T) {
	long := "/" + strings.Repeat("é", 8<<10) // 16 KiB; byte 1024 falls inside an é
	f := newFixture(t, service.Options{Routes: []string{service.RoutePing, service.RouteAdmin}})
	for _, path := range []string{long, "/admin/overrides/ping" + long} {
		wantCut(t, loggedLine(t, f.logs, func() { f.do(t, "GET", path) }), "path", path)
	}
	wantCut(t, loggedLine(t, f.logs, func() { f.send(t, "PUT", "/admin/overrides/ping/k"+strings.Repeat("%C3%A9", 8<<10), `{"limit": 5}`) }),
		"path", "/admin/overrides/ping/k"+long[1:])
	method := strings.Repeat("GET", 5<<10)
	wantCut(t, loggedLine(t, f.logs, func() { f.do(t, method, "/ping") }), "method", method)
	kib := "/" + strings.Repeat("x", 1023)
	if line := loggedLine(t, f.logs, func() { f.do(t, "GET", kib) }); line["path"] != kib || line["path_bytes"] != nil {
		t.Errorf("a path of 1 KiB logged as %.40v… (path_bytes %v), want whole", line["path"], line["path_bytes"])
	}

	emf := &bytes.Buffer{}
	p := limiter.Policy{Name: "all", Limit: 10, Window: time.Minute}
	g := newGuard(t, service.Options{Rules: []limiter.Rule{{Policy: p, Routes: []string{"/"}}}, Metrics: metrics.New(emf, "")}, ok)
	wantCut(t, loggedLine(t, g.logs, func() { g.do(t, "GET", long, "X-Client-Key", "k") }), "path", long)
	for line := range strings.Lines(emf.String()) {
		if len(line) > 1<<10 || strings.Contains(line, "é") {
			t.Errorf("an EMF line of %d bytes holds the path: %.200s", len(line), line)
		}
	}
	if emf.Len() == 0 {
		t.Error("no EMF line for the counted request")
	}
	// A key function's error may repeat the request: cut too.
	g = newGuard(t, service.Options{Rules: []limiter.Rule{{Policy: p, Routes: []string{"/"}}},
		Keys: map[string]service.KeyFunc{"all": func(r *http.Request) (string, error) {
			return "", errors.New("no session for " + r.URL.Path)
		}}}, ok)
	line := loggedLine(t, g.logs, func() { g.do(t, "GET", long) })
	wantCut(t, line, "path", long)
	if fe, _ := line["func_error"].([]any); len(fe) != 1 || !strings.HasPrefix(fe[0].(string), "key of all: no session for /é") || len(fe[0].(string)) > 1024+len("…") {
		t.Errorf("func_error %.100v, want the key function's error, cut at 1 KiB", line["func_error"])
	}
}

// TestLogLinesAreBoundedAsWritten: the 1 KiB bound is of a value as the
// line writes it, JSON escapes included: a path of 3,000 control
// characters, each written as 6 bytes (\u0001), logs about 1 KiB of
// path, not 18 KiB (its 3 KiB of bytes cut at 1 KiB used to log a line
// of 6.3 KB). A path of quotes is cut the same way.
func TestLogLinesAreBoundedAsWritten(t *testing.T) {
	f := newFixture(t, service.Options{Routes: []string{service.RoutePing}})
	for _, c := range []struct{ sent, path string }{
		{"/" + strings.Repeat("%01", 3000), "/" + strings.Repeat("\x01", 3000)},
		{"/" + strings.Repeat("%22", 3000), "/" + strings.Repeat(`"`, 3000)},
	} {
		f.logs.Reset()
		f.do(t, "GET", c.sent)
		if f.logs.Len() > 2<<10 {
			t.Errorf("a path of %d bytes of %q logged a line of %d bytes, want about 1 KiB of path in it", len(c.path), c.path[1], f.logs.Len())
		}
		line := loggedLine(t, f.logs, func() { f.do(t, "GET", c.sent) })
		got, _ := line["path"].(string)
		cut, ok := strings.CutSuffix(got, "…")
		written, _ := json.Marshal(cut)
		if !ok || !strings.HasPrefix(c.path, cut) || len(written)-2 > 1024 || len(written)-2 <= 1024-6 {
			t.Errorf("path logged as %d bytes (%d written), want the path's start, about 1 KiB as written, then …", len(got), len(written)-2)
		}
		if n := line["path_bytes"]; n != float64(len(c.path)) {
			t.Errorf("path_bytes = %v, want %d", n, len(c.path))
		}
	}
}
