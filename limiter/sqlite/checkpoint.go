package sqlite

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"time"
)

// checkpointInterval is the least time between two background checkpoints
// of one WAL file: often enough that the inline checkpoint SQLite runs
// when the WAL reaches 1,000 pages finds nearly every page already copied
// back, and so costs the batch that triggers it two fsyncs and little
// else, rare enough that copying a hot page again and again costs less
// than what it spares. On the local server under wrk, one quiet pair of
// runs each: p99 4.74 and 4.69 ms at 20 ms, 5.24 and 5.33 at 50 ms,
// about 6 ms with none; 10 ms was no better than 20 (BENCHMARKS.md).
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
// bound on the log's size. Neither restarts the log: the next writer does,
// when it finds the whole log copied back, which this one, running while
// this process's transactions go on, rarely leaves it; the inline one,
// run between two of them, does. An inline one that starts while this
// one runs finds the checkpoint lock taken and is skipped, so the log may
// pass 1,000 pages by a few hundred: in 60 s under wrk, 1,178 pages at
// most, against 1,013 without this.
//
// Only for WAL, which only the local server and embedding programs use: a
// rollback journal has no log to copy back.
type checkpointer struct {
	db   *sql.DB
	conn *sql.Conn // the one connection, held for c's life
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// startCheckpointer opens the checkpointing connection to the database at
// path, which must still be file, the one the store opened (os.SameFile),
// and starts it; nil if it cannot, which leaves the inline checkpoints as
// they were.
// The connection is opened here, not at its first use: opened later by
// name, it could open a file that took the path since (a restore), and
// copy the store's log into it. It checkpoints once here, which opens the
// log and its index too, and then keeps this one connection: database/sql
// never reopens it by name.
func startCheckpointer(ctx context.Context, path string, file os.FileInfo) *checkpointer {
	// Not dsn's pragmas: this connection never sets the journal mode (a
	// passive checkpoint of a file that is no longer WAL does nothing,
	// and the store's own connection notices the change, see
	// checkJournalMode), and it never waits for a lock.
	db, err := sql.Open("sqlite", fileURI(path, url.Values{"_pragma": {"busy_timeout(0)"}}))
	if err != nil {
		return nil
	}
	conn, err := db.Conn(ctx)
	if err == nil {
		_, err = conn.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)")
	}
	if now, serr := os.Stat(path); err != nil || serr != nil || !os.SameFile(now, file) {
		if conn != nil {
			conn.Close()
		}
		db.Close()
		return nil
	}
	c := &checkpointer{db: db, conn: conn, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
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
		c.conn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
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
// finishes first (its fsyncs, a few milliseconds on a local disk), which a
// handle retired under the shard's lock makes the shard's callers wait
// for once.
func (c *checkpointer) close() {
	if c == nil {
		return
	}
	close(c.stop)
	<-c.done
	c.conn.Close()
	c.db.Close()
}
