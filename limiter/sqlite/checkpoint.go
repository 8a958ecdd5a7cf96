package sqlite

import (
	"context"
	"database/sql"
	"net/url"
	"time"
)

// checkpointInterval is the least time between two background checkpoints
// of one WAL file: often enough that the inline checkpoint SQLite runs
// when the WAL reaches 1,000 pages finds nearly every page already copied
// back, and so costs the batch that triggers it two fsyncs and little
// else, rare enough that copying a hot page again and again costs less
// than what it spares (20 ms was 5-20% lower p99 than none on the local
// server, 10 ms no better; BENCHMARKS.md).
const checkpointInterval = 20 * time.Millisecond

// checkpointer copies a WAL database's log back into the database file in
// the background, on a connection of its own, so that a decision rarely
// waits for it.
//
// In WAL mode SQLite checkpoints inline: the commit that takes the log past
// 1,000 pages copies them all back and fsyncs the log and the database
// before it returns, and the batch of decisions it carried waits for that
// (the local server's p99). A PASSIVE checkpoint takes no lock a writer
// needs, so this one runs beside the writes; SQLite's own stays as the
// bound on the log's size, should this one fall behind (a passive
// checkpoint never restarts the log while writes go on; the inline one,
// run between two of this process's transactions, does). An inline one
// that starts while this one runs finds the checkpoint lock taken and is
// skipped, so the log may pass 1,000 pages by a few hundred: in 60 s
// under wrk, 1,178 pages at most, against 1,013 without this.
//
// Only for WAL, which only the local server and embedding programs use: a
// rollback journal has no log to copy back.
type checkpointer struct {
	db   *sql.DB
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// startCheckpointer opens the checkpointing connection to the database at
// path and starts it; nil if the connection cannot be opened, which leaves
// the inline checkpoints as they would be without it.
func startCheckpointer(path string) *checkpointer {
	// Not dsn's pragmas: this connection never sets the journal mode (a
	// passive checkpoint of a file that is no longer WAL does nothing,
	// and the store's own connection notices the change, see
	// checkJournalMode), and it never waits for a lock.
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_pragma=busy_timeout(0)")
	if err != nil {
		return nil
	}
	db.SetMaxOpenConns(1)
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// run checkpoints after each kick, at most once an interval, until stop.
// An idle store is never woken. A failed checkpoint is left for the next
// kick or the inline one: it loses nothing, the pages stay in the log.
func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		c.db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		select {
		case <-c.stop:
			return
		case <-time.After(checkpointInterval):
		}
	}
}

// committed tells c that a transaction committed. It never blocks.
func (c *checkpointer) committed() {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// close stops c and closes its connection; a checkpoint in progress
// finishes first.
func (c *checkpointer) close() {
	if c == nil {
		return
	}
	close(c.stop)
	<-c.done
	c.db.Close()
}
