package main

import (
	"bytes"
	"strings"
	"testing"
)

// checkOut runs -check on env and returns its exit code and what it
// printed, stdout and stderr together.
func checkOut(env map[string]string) (int, string) {
	var out bytes.Buffer
	code := checkConfig(&out, &out, func(k string) string { return env[k] })
	return code, out.String()
}

// TestCheckRefusesWhatTheServerRefuses: a DB_PATH that names a directory
// passed -check ("The Lambda functions would accept it") while the server
// exited at start; -check runs the server's own validation, and says no.
func TestCheckRefusesWhatTheServerRefuses(t *testing.T) {
	dir := t.TempDir()
	code, out := checkOut(map[string]string{"DB_PATH": dir})
	if code != 2 || !strings.Contains(out, "DB_PATH: database path "+dir+" is a directory") || strings.Contains(out, "would accept it") {
		t.Errorf("DB_PATH=%s (a directory): exit %d\n%s\nwant 2, and that the path is a directory", dir, code, out)
	}
}

// TestCheckTellsRoutesPerHost: a rule whose pattern names a host counts
// the requests to that host; -check probed with no host and said no
// policy counts GET /ping, while a request with Host: 127.0.0.1 was
// counted.
func TestCheckTellsRoutesPerHost(t *testing.T) {
	code, out := checkOut(map[string]string{"POLICIES": `[{"name":"local","limit":5,"window":"60s","routes":["127.0.0.1/ping"]}]`})
	for _, want := range []string{
		`GET /ping: no policy counts it; it answers 200 {"counted": false}`,
		"GET /ping (Host: 127.0.0.1): counted under local\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("a host pattern: exit %d, want it to say %q:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "note: local counts none") {
		t.Errorf("a policy counting /ping on its host is said to count none of the routes:\n%s", out)
	}
}

// TestCheckListsABadRouteUnderPolicies: a route pattern ServeMux refuses
// is a problem of POLICIES, listed under its heading with that policy's
// other problems, not under a heading of its own.
func TestCheckListsABadRouteUnderPolicies(t *testing.T) {
	code, out := checkOut(map[string]string{"POLICIES": `[{"name":"a","limit":0,"window":"60s","routes":["GET /a/{x"]}]`})
	if code != 2 || strings.Count(out, "POLICIES:") != 1 {
		t.Fatalf("exit %d, want 2 and one POLICIES heading:\n%s", code, out)
	}
	_, under, _ := strings.Cut(out, "POLICIES:")
	for _, want := range []string{`policy "a": limit 0`, `policy "a": route "GET /a/{x"`} {
		if !strings.Contains(under, "\n    "+want) {
			t.Errorf("want %q indented under POLICIES:\n%s", want, out)
		}
	}
}
