package service

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/ft251/ratelimit/limiter"
)

// request is one request in flight, with what its log line reports.
type request struct {
	w      *recorder
	r      *http.Request
	caller Caller
	now    time.Time // the request's instant, read once
	start  time.Time // when it arrived, on the process's clock, for its latency

	key        string
	tier       string  // the first policy's tier, for one with tiers: its log line's
	verdict    verdict // what became of it; empty until something did
	count      int64
	fromMemory bool             // a rejection made without the store (limiter.RejectCache)
	outcome    *limiter.Outcome // every policy's decision, when the store answered
	err        error            // the store's error, logged but never sent
	// shadowSkipped names the shadow policies left out of the request
	// because they could not find their key in it.
	shadowSkipped []string
	// passed is set when the request was handed to the handler behind
	// the middleware: a panic from there is that handler's, and goes on.
	passed bool
	// panicked is set when that handler panicked: its line says so, as
	// no status may have been sent.
	panicked bool
	// funcErr are the errors of the caller's key and cost functions, for
	// the log line only.
	funcErr []string
	// admin describes an admin action for the log line: who, what,
	// before and after.
	admin map[string]any
}

// cancelled reports whether the store's error is the client's going away
// (the request's context cancelled), not a fault of the store: it is
// neither measured nor alarmed on.
func (req *request) cancelled() bool {
	return req.err != nil && errors.Is(req.err, context.Canceled) && req.r.Context().Err() != nil
}

// fail answers with the problem err describes.
func (req *request) fail(err error) {
	writeError(req.w, req.r, err)
}

// ok answers 200 with v as JSON.
func (req *request) ok(v any) error {
	writeJSON(req.w, "application/json", http.StatusOK, v)
	return nil
}

// noContent answers 204.
func (req *request) noContent() error {
	req.w.Header().Set("Cache-Control", "no-store")
	req.w.WriteHeader(http.StatusNoContent)
	return nil
}

// serve hands the request to h, whose answer is the request's.
func (req *request) serve(h http.Handler) {
	h.ServeHTTP(req.w, req.r.WithContext(withRequest(req.r.Context(), req)))
}

// recorder notes the status of the response and whether it has been
// started, so that a panic after it does not write a second one. For a
// HEAD it drops the body, and sends the status and headers alone.
type recorder struct {
	http.ResponseWriter
	wrote  bool
	status int
	head   bool
}

func (w *recorder) WriteHeader(status int) {
	if !w.wrote {
		w.wrote, w.status = true, status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.head {
		if !w.wrote {
			w.WriteHeader(http.StatusOK)
		}
		return len(b), nil
	}
	if !w.wrote {
		w.wrote, w.status = true, http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered, for a handler behind the middleware that
// streams (server-sent events) and asserts http.Flusher; a writer that
// cannot flush ignores it, as http.ResponseController would report.
func (w *recorder) Flush() {
	if !w.wrote {
		w.wrote, w.status = true, http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over, for a handler behind the middleware
// that upgrades it (WebSocket), when the writer underneath can;
// otherwise it reports http.ErrNotSupported.
func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && !w.wrote {
		w.wrote, w.status = true, http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the connection's writer
// (flushing, deadlines) through the recorder.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// newRequestID makes an id for requests that arrive without one.
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
