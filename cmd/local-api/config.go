package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ft251/ratelimit/limiter"
	"github.com/ft251/ratelimit/limiter/httpapi"
)

// The local server's own settings and defaults. The rest of its
// configuration is what the functions read (limiter.ConfigFromEnv).
const (
	defaultAddr          = "127.0.0.1:3000" // where `sam local start-api` listens
	defaultPruneInterval = time.Minute
	defaultDBPath        = "./data/ratelimit.db"
)

// config is the local server's configuration.
type config struct {
	limiter.Config
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

// readConfig reads the configuration as the functions do, with what is
// different on one machine: DB_PATH defaults to defaultDBPath, METRICS to
// off (stdout is for people here), and JOURNAL_MODE may be WAL, whose
// shared-memory index works between the processes of one host, which the
// local server is (every Lambda execution environment is a host of its
// own, so the functions refuse it). Every problem is reported at once.
func readConfig(getenv func(string) string) (config, error) {
	wal := strings.EqualFold(getenv("JOURNAL_MODE"), "WAL")
	lc, err := httpapi.ConfigFromEnv(func(k string) string {
		v := getenv(k)
		switch {
		case k == "JOURNAL_MODE" && wal:
			return ""
		case k == "DB_PATH" && v == "":
			return defaultDBPath
		case k == "METRICS" && v == "":
			return "off"
		}
		return v
	})
	var problems []error
	if ce := (*limiter.ConfigError)(nil); errors.As(err, &ce) {
		problems = ce.Problems
	} else if err != nil {
		return config{}, err
	}
	c := config{Config: lc, Addr: defaultAddr, PruneInterval: defaultPruneInterval}
	if wal {
		c.Store.JournalMode = "WAL"
		if c.Store.Shards > 1 {
			problems = append(problems, errors.New("SQLITE_SHARDS: WAL commits a request counted in several shards atomically per file only; use one shard with WAL, or a rollback journal"))
		}
	}
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
	if c.Admin, err = limiter.ParseSwitch(getenv("ADMIN")); err != nil {
		problems = append(problems, fmt.Errorf("ADMIN: %w", err))
	}
	if len(problems) > 0 {
		return config{}, &limiter.ConfigError{Problems: problems}
	}
	return c, nil
}
