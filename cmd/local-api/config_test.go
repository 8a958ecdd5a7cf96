package main

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestLocalConfigDefaultsThePathAndAllowsWAL: the local server needs no
// DB_PATH, and may run in WAL, which the functions refuse.
func TestLocalConfigDefaultsThePathAndAllowsWAL(t *testing.T) {
	t.Parallel()
	c, err := readConfig(env(map[string]string{"JOURNAL_MODE": "wal"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Store.Path != "./data/ratelimit.db" || c.Store.JournalMode != "WAL" || c.Addr != "127.0.0.1:3000" || c.PruneInterval != time.Minute {
		t.Errorf("local config = %+v", c)
	}
	_, err = readConfig(env(map[string]string{"RATE_LIMIT": "abc", "ADDR": "bogus", "PRUNE_INTERVAL": "1ns"}))
	for _, name := range []string{"RATE_LIMIT", "ADDR", "PRUNE_INTERVAL"} {
		if err == nil || !strings.Contains(err.Error(), name+":") {
			t.Errorf("local config error does not mention %s: %v", name, err)
		}
	}
}

// TestConfigMetrics is the local half of limiter's test of the same name:
// metrics are off by default here, where stdout is for people.
func TestConfigMetrics(t *testing.T) {
	t.Parallel()
	c, err := readConfig(env(nil))
	if err != nil || c.Metrics {
		t.Errorf("local server: metrics %v (%v), want off by default: its stdout is for people", c.Metrics, err)
	}
	if c, _ := readConfig(env(map[string]string{"METRICS": "emf"})); !c.Metrics {
		t.Error("METRICS=emf did not turn metrics on locally")
	}
}
