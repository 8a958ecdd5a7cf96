package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
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
	t.Parallel()
	dir := t.TempDir()
	code, out := checkOut(map[string]string{"DB_PATH": dir})
	if code != 2 || !strings.Contains(out, "DB_PATH: database path "+dir+" is a directory") || strings.Contains(out, "would accept it") {
		t.Errorf("DB_PATH=%s (a directory): exit %d\n%s\nwant 2, and that the path is a directory", dir, code, out)
	}
	// What the server refused at start, after -check had passed it (exit
	// 0): a file where the database's directory belongs, a directory whose
	// parent is missing (the server makes only the last one), an address
	// it cannot listen on.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "nowhere"), filepath.Join(dir, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "loop"), filepath.Join(dir, "loop")); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for env, want := range map[[2]string]string{
		{"DB_PATH", filepath.Join(file, "x.db")}:            "DB_PATH: " + file + " is a file, not a directory",
		{"DB_PATH", filepath.Join(dir, "no", "a", "x.db")}:  "DB_PATH: " + filepath.Join(dir, "no") + " does not exist",
		{"DB_PATH", filepath.Join(file, "data", "x.db")}:    "DB_PATH: a file stands where a directory of " + filepath.Join(file, "data") + " belongs",
		{"DB_PATH", filepath.Join(dir, "dangling", "x.db")}: "DB_PATH: " + filepath.Join(dir, "dangling") + " is a symbolic link to nothing",
		{"DB_PATH", filepath.Join(dir, "db", "x.db") + "/"}: "DB_PATH: " + filepath.Join(dir, "db", "x.db") + "/ names a directory, not the database file",
		{"DB_PATH", dir + "/d/../e/.."}:                     "DB_PATH: " + dir + "/d/../e/.. names a directory, not the database file",
		{"DB_PATH", filepath.Join(dir, "loop", "x.db")}:     "DB_PATH: " + filepath.Join(dir, "loop") + " is a loop of symbolic links",
		{"ADDR", "192.0.2.1:3907"}:                          "ADDR: cannot listen on 192.0.2.1:3907",
	} {
		vars := map[string]string{"DB_PATH": filepath.Join(dir, "db", "x.db"), env[0]: env[1]}
		if code, out := checkOut(vars); code != 2 || !strings.Contains(out, want) {
			t.Errorf("%s=%s: exit %d\n%s\nwant 2, saying %q", env[0], env[1], code, out, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "db")); err == nil {
		t.Errorf("-check made the database's directory")
	}
	// A port in use is the server's now, not the configuration's: noted,
	// and -check passes (it failed wherever the server, or sam local,
	// already listened).
	vars := map[string]string{"DB_PATH": filepath.Join(dir, "db", "x.db"), "ADDR": taken.Addr().String()}
	if code, out := checkOut(vars); code != 0 || !strings.Contains(out, "listen: "+taken.Addr().String()+" (in use now: the server could not listen there until it is free)\n") {
		t.Errorf("ADDR in use: exit %d\n%s\nwant 0, saying so on its listen line", code, out)
	}
	// An address no interface has is listed with the other problems.
	vars = map[string]string{"DB_PATH": filepath.Join(dir, "db", "x.db"), "ADDR": "192.0.2.1:3907", "RATE_LIMIT": "0"}
	if code, out := checkOut(vars); code != 2 || !strings.Contains(out, "ADDR: cannot listen") || !strings.Contains(out, "RATE_LIMIT:") {
		t.Errorf("a bad ADDR beside a bad RATE_LIMIT: exit %d\n%s\nwant both listed", code, out)
	}
}

// TestCheckTellsRoutesPerHost: a rule whose pattern names a host counts
// the requests to that host; -check probed with no host and said no
// policy counts GET /ping, while a request with Host: 127.0.0.1 was
// counted.
func TestCheckTellsRoutesPerHost(t *testing.T) {
	t.Parallel()
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

// TestCheckNotesARouteWithAnUnknownMethod: "GETT /x" is a valid pattern
// (ServeMux takes any method token), so a typo in a route's method passed
// -check and counted nothing. -check says so, and still exits 0: a method
// of one's own (WebDAV's PROPFIND) is allowed.
func TestCheckNotesARouteWithAnUnknownMethod(t *testing.T) {
	t.Parallel()
	code, out := checkOut(map[string]string{"POLICIES": `[{"name":"a","limit":5,"window":"60s","routes":["GETT /x","PROPFIND /dav/","get /y","POST /z"]}]`})
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s", code, out)
	}
	for _, want := range []string{
		`note: a: route "GETT /x" has the method "GETT", which is none of HTTP's own`,
		`note: a: route "PROPFIND /dav/" has the method "PROPFIND", which is none of HTTP's own`,
		`note: a: route "get /y" has the method "get", which is none of HTTP's own`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"POST /z" has the method`) {
		t.Errorf("a route with a standard method is noted:\n%s", out)
	}
	// ServeMux splits a pattern's method at a space or a tab, and reads a
	// pattern that begins with one as having no method (any method).
	code, out = checkOut(map[string]string{"POLICIES": `[{"name":"a","limit":5,"window":"60s","routes":["GET\t/ping"," /x","GET\texample.com/y"]}]`})
	for _, want := range []string{"GET /ping: counted under a\n", "GET /ping (Host: example.com): counted under a\n"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("tabs and a leading space: exit %d, want %q:\n%s", code, want, out)
		}
	}
	if strings.Contains(out, "has the method") || strings.Contains(out, "Host: GET") || strings.Contains(out, "Host: \t") {
		t.Errorf("tabs and a leading space: a method noted or a host made up:\n%s", out)
	}
}

// TestCheckListsABadRouteUnderPolicies: a route pattern ServeMux refuses
// is a problem of POLICIES, listed under its heading with that policy's
// other problems, not under a heading of its own.
func TestCheckListsABadRouteUnderPolicies(t *testing.T) {
	t.Parallel()
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

// TestCheckPrintsEachPolicysTiers: -check lists a policy's tiers,
// smallest limit first, with a GCRA tier's burst, and where a request
// names its tier; a policy without tiers reads as before.
func TestCheckPrintsEachPolicysTiers(t *testing.T) {
	t.Parallel()
	code, out := checkOut(map[string]string{"DB_PATH": t.TempDir() + "/rl.db", "POLICIES": `[
		{"name": "api", "limit": 100, "window": "60s", "algorithm": "gcra", "tiers": {"enterprise": {"limit": 10000, "burst": 500}, "pro": {"limit": 1000, "burst": 200}}, "tier": {"source": "claim", "claim": "plan"}},
		{"name": "quota", "limit": 10, "window": "1d", "routes": ["POST /check"], "tiers": {"pro": {"limit": 100}}},
		{"name": "edge", "limit": 5, "window": "1s", "tiers": {"b": {"limit": 7}, "a": {"limit": 7}}, "tier": {"source": "header", "header": "X-Plan"}},
		{"name": "daily", "limit": 1000, "window": "1d"}]`})
	for _, want := range []string{
		"  api: 100 per 1m0s, gcra, burst 100, key header, routes [/ping], tiers pro 1000 (burst 200), enterprise 10000 (burst 500) by claim plan\n",
		"  quota: 10 per 24h0m0s, fixed window, key header, routes [POST /check], tiers pro 100 by POST /check's \"tier\" only\n",
		"  edge: 5 per 1s, fixed window, key header, routes [/ping], tiers a 7, b 7 by header X-Plan\n",
		"  daily: 1000 per 24h0m0s, fixed window, key header, routes [/ping]\n",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d, want it to print %q:\n%s", code, want, out)
		}
	}
}
