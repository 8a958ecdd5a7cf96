package main

import (
	"bufio"
	"io"
	"sync"
	"time"
)

// flushEvery bounds how long a log line waits in logOut's buffer.
const flushEvery = 5 * time.Millisecond

// logBuffer is the size of logOut's buffer: a few hundred request lines.
const logBuffer = 64 << 10

// logOut is the server's stdout for its log and metric lines: buffered,
// so that a busy server writes its lines a buffer at a time rather than
// with a system call each (at 10,000 requests a second, one write per
// line cost more than the line's encoding), and flushed at most
// flushEvery after a line is written, when the buffer fills, and at
// Close, which the server calls before it exits. A request's decision is
// committed to the store before its line is written, so nothing the store
// knows is lost with a line; what a kill -9 (or a crash outside the
// handlers, which recover their own panics) loses is the last few
// milliseconds of lines, at most logBuffer bytes of them.
//
// Each Write is one line (slog's handlers write a record with one call),
// written whole under the lock, so that lines from concurrent requests
// never interleave.
type logOut struct {
	mu      sync.Mutex
	w       *bufio.Writer
	pending bool // a flush is scheduled
	closed  bool
}

func newLogOut(w io.Writer) *logOut {
	return &logOut{w: bufio.NewWriterSize(w, logBuffer)}
}

// Write buffers p, and schedules a flush if none is. After Close it
// writes p through at once.
func (o *logOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, err := o.w.Write(p)
	switch {
	case err != nil:
	case o.closed:
		err = o.w.Flush()
	case !o.pending:
		o.pending = true
		time.AfterFunc(flushEvery, o.scheduled)
	}
	return n, err
}

// scheduled is the flush a Write scheduled.
func (o *logOut) scheduled() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = false
	o.w.Flush() // an error is sticky: the next Write reports it
}

// Close flushes what is buffered; later writes go through unbuffered.
func (o *logOut) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	return o.w.Flush()
}
