package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Config says where a Store keeps its files and how it opens them. Every
// field but Path has a default: its zero value.
type Config struct {
	// Path is the database file. With Shards above 1 it is shard 0, and
	// shard i is Path + ".shard-<i>" (ShardPath).
	Path string
	// Shards is how many files the counters are spread over, 1 to
	// MaxShards; zero means 1. Each key's counters live in the shard its
	// client key hashes to, so one key's policies share one. The files
	// record the count they were created with, and a store configured with
	// another refuses them.
	Shards int
	// JournalMode is SQLite's journal mode: DELETE (the default), TRUNCATE
	// or PERSIST, the rollback journals, which work across hosts on EFS;
	// or WAL, whose index lives in shared memory on one host, and so only
	// for processes of one machine, with one shard.
	JournalMode string
	// BusyTimeout bounds each wait for a database lock, 1ms or more; zero
	// means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// ReadOnly opens the databases for reading only, as the status
	// function does on its read-only mount: no migrations, no writes.
	ReadOnly bool
}

// Defaults and bounds of a Config.
const (
	DefaultJournalMode = "DELETE"
	DefaultBusyTimeout = 3 * time.Second
	// MaxShards bounds Shards: each shard is a file with its own lock,
	// connection and prune pass, and a request's charges attach at most as
	// many files as it has charges.
	MaxShards = 64
)

// A ConfigError is one thing wrong with a Config: the field, and what.
type ConfigError struct {
	Field   string // "Path", "Shards", "JournalMode" or "BusyTimeout"
	Problem string
}

func (e *ConfigError) Error() string { return "sqlite: " + e.Field + ": " + e.Problem }

// Validate reports every problem with c as one error joining a
// *ConfigError each: no path, a path that names a directory (ends in a
// slash, "." or "..", or the file system says so), a journal mode SQLite does not have, a shard count out
// of range, WAL with several shards (WAL commits a transaction over
// several files atomically per file only: a request counted in two shards
// could survive a crash half counted), a negative busy timeout. Open runs
// it; so do hosts that check a configuration before serving.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if c.Path == "" {
		bad("Path", "not set; it names the SQLite database file, e.g. /mnt/efs/ratelimit.db")
	}
	mode := c.journalMode()
	switch mode {
	case "DELETE", "TRUNCATE", "PERSIST", "WAL":
	default:
		// Anything else would open, and then fail every decision with
		// "wrong journal mode".
		bad("JournalMode", "%q is not DELETE, TRUNCATE, PERSIST or WAL", c.JournalMode)
	}
	shards := max(c.Shards, 1)
	switch {
	case c.Shards < 0 || c.Shards > MaxShards:
		bad("Shards", "%d is not a whole number of files from 1 to %d", c.Shards, MaxShards)
	case shards > 1 && mode == "WAL":
		bad("Shards", "WAL commits a request counted in several shards atomically per file only; use one shard with WAL, or a rollback journal")
	}
	if c.BusyTimeout < 0 || c.BusyTimeout > 0 && c.BusyTimeout < time.Millisecond {
		// SQLite waits in whole milliseconds, and a decision's own
		// statements outlast a microsecond: every decision would fail.
		bad("BusyTimeout", "%v is below 1ms (zero means %v)", c.BusyTimeout, DefaultBusyTimeout)
	}
	namesDir := c.Path != "" && (strings.HasSuffix(c.Path, string(filepath.Separator)) ||
		filepath.Base(c.Path) == "." || filepath.Base(c.Path) == "..")
	if namesDir {
		// Whatever is there now: through a directory that does not
		// exist ("d/../e/..") the path cannot be looked at, and every
		// decision would fail to open it.
		bad("Path", "%s names a directory, not the database file", c.Path)
	}
	if c.Path != "" && !namesDir && c.Shards >= 0 && c.Shards <= MaxShards {
		for i := range shards {
			if fi, err := os.Stat(ShardPath(c.Path, i)); err == nil && fi.IsDir() {
				bad("Path", "database path %s is a directory", ShardPath(c.Path, i))
			}
		}
	}
	return errors.Join(errs...)
}

// withDefaults is c with its defaults filled in and its path absolute.
func (c Config) withDefaults() (Config, error) {
	c.JournalMode = c.journalMode()
	c.Shards = max(c.Shards, 1)
	if c.BusyTimeout == 0 {
		c.BusyTimeout = DefaultBusyTimeout
	}
	path, err := filepath.Abs(c.Path)
	if err != nil {
		return c, fmt.Errorf("sqlite: database path %q: %w", c.Path, err)
	}
	c.Path = path
	return c, nil
}

func (c Config) journalMode() string {
	if c.JournalMode == "" {
		return DefaultJournalMode
	}
	return strings.ToUpper(c.JournalMode)
}
