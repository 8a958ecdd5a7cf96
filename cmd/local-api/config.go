package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/ft251/ratelimit/internal/envconfig"
	"github.com/ft251/ratelimit/internal/stores"
)

// The local server's own settings and defaults. The rest of its
// configuration is what the functions read (envconfig.Read), as one
// machine reads it (envconfig.Local).
const (
	defaultAddr          = "127.0.0.1:3000" // where `sam local start-api` listens
	defaultPruneInterval = time.Minute
)

// config is the local server's configuration.
type config struct {
	envconfig.Config
	// Addr is where it listens (ADDR), and PruneInterval how often it
	// prunes, as the scheduled function does in AWS (PRUNE_INTERVAL).
	Addr          string
	PruneInterval time.Duration
	// Admin serves the admin routes under /admin/ (ADMIN=on), which
	// change overrides and counters; off, they answer 404 as any unknown
	// path. Deployed, they are their own IAM-authorized function.
	Admin bool
}

// listenable reports whether host could be listened on: empty (every
// address), an IP address, or a host name (letters, digits, '-' and '.',
// not all digits and dots, which would be a malformed address).
func listenable(host string) bool {
	if host == "" || net.ParseIP(host) != nil {
		return true
	}
	name, digits := true, true
	for _, r := range host {
		name = name && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.')
		digits = digits && (r >= '0' && r <= '9' || r == '.')
	}
	return name && !digits
}

// dbDirProblem is what keeps the server from making or using the
// directory of the database at path, which it makes if it is missing
// (makeDBDir), but not the directories above it: a file in its place or
// above it, a missing parent, a symbolic link to nothing, a directory this
// process may not search. Nothing is made here.
func dbDirProblem(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case err == nil && !fi.IsDir():
		return fmt.Errorf("DB_PATH: %s is a file, not a directory", dir)
	case err == nil && syscall.Access(dir, 2 /* W_OK */) != nil:
		return fmt.Errorf("DB_PATH: %s is not writable by this user: the database and its journal are made there", dir)
	case err == nil:
		return nil
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("DB_PATH: %s is a loop of symbolic links", dir)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("DB_PATH: a file stands where a directory of %s belongs", dir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("DB_PATH: %s cannot be reached: %v", dir, errors.Unwrap(err))
	case !errors.Is(err, fs.ErrNotExist):
		return nil // not to be told from here: the server says
	}
	if li, err := os.Lstat(dir); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("DB_PATH: %s is a symbolic link to nothing", dir)
	}
	parent := filepath.Dir(dir)
	if fi, err := os.Stat(parent); err != nil || !fi.IsDir() {
		return fmt.Errorf("DB_PATH: %s does not exist: the server makes the database's own directory (%s), not those above it", parent, filepath.Base(dir))
	}
	if syscall.Access(parent, 2 /* W_OK */) != nil {
		return fmt.Errorf("DB_PATH: %s is not writable by this user: the server would make %s there", parent, filepath.Base(dir))
	}
	return nil
}

// readConfig reads the configuration as the functions do, on one machine
// (envconfig.Local: DB_PATH defaults to ./data/ratelimit.db, METRICS to
// off, and JOURNAL_MODE may be WAL), and the local server's own settings.
// Every problem is reported at once.
func readConfig(getenv func(string) string) (config, error) {
	lc, err := envconfig.Read(getenv, envconfig.Local)
	var problems []error
	if ce := (*envconfig.ConfigError)(nil); errors.As(err, &ce) {
		problems = ce.Problems
	} else if err != nil {
		return config{}, err
	}
	c := config{Config: lc, Addr: defaultAddr, PruneInterval: defaultPruneInterval}
	if v := getenv("ADDR"); v != "" {
		if host, port, err := net.SplitHostPort(v); err != nil {
			problems = append(problems, fmt.Errorf("ADDR: %q is not host:port, e.g. 127.0.0.1:3000", v))
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			problems = append(problems, fmt.Errorf("ADDR: port %q is not from 0 to 65535", port))
		} else if !listenable(host) {
			problems = append(problems, fmt.Errorf("ADDR: host %q is not an IP address or a host name", host))
		}
		c.Addr = v
	}
	if v := getenv("PRUNE_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			problems = append(problems, fmt.Errorf("PRUNE_INTERVAL: %q is not a duration of at least 1s, e.g. 1m", v))
		}
		c.PruneInterval = d
	}
	if c.Admin, err = envconfig.ParseSwitch(getenv("ADMIN")); err != nil {
		problems = append(problems, fmt.Errorf("ADMIN: %w", err))
	}
	if lc.Store.Kind == stores.SQLite {
		if err := dbDirProblem(lc.Store.Path); err != nil {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return config{}, &envconfig.ConfigError{Problems: problems}
	}
	return c, nil
}
