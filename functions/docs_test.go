//go:build linux

// The README's check of the deploy runs the function under the Lambda
// Runtime Interface Emulator, which runs on Linux only, as Lambda does.

package functions_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
)

// The documentation's commands are tests: every fenced sh, go or python
// block of the README and of docs/*.md is preceded by an HTML comment that
// says what becomes of it (docs/testing.md has the table):
//
//	<!-- runnable: go -->        a complete main.go: built in a module of its own
//	<!-- output -->              (a text block after it) what it prints when run
//	<!-- runnable: sh -->        run with bash at the repository's root
//	<!-- runnable: server -->    started, and the page's later blocks run against it
//	<!-- runnable: python -->    run with python3, against the page's server
//	<!-- tested by: DIR TestName, .ci/run -->   checked by another test, which must exist
//	<!-- not run: why -->        needs AWS, root or minutes
//
// "; needs a b py:m" after a runnable mode names the programs (py: the
// Python modules) a block needs: without them it is skipped, or fails when
// RATELIMIT_REQUIRE_TOOLS is set.

// docBlock is one fenced block of a page.
type docBlock struct {
	page   string // the page, relative to the repository's root
	line   int    // the line of its opening fence
	lang   string // its info string: sh, go, python, text, ...
	marker string // the text of the HTML comment on the line before it, if any
	body   string // its lines, without the fence's indentation
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d", b.page, b.line) }

// commandLangs are the info strings of blocks that hold commands or code,
// which must say what becomes of them.
var commandLangs = []string{"sh", "bash", "shell", "console", "go", "python"}

// repoRoot is the repository's root: go test runs in functions/.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// docPages are the README and every page of docs/, relative to root.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range pages {
		out = append(out, strings.TrimPrefix(p, root+string(filepath.Separator)))
	}
	return out
}

var (
	commentLine = regexp.MustCompile(`^\s*<!--\s*(.*?)\s*-->\s*$`)
	fenceLine   = regexp.MustCompile("^(\\s*)```\\s*([A-Za-z0-9_+-]*)\\s*$")
)

// readBlocks returns the fenced blocks of page, in order.
func readBlocks(t *testing.T, root, page string) []docBlock {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(root, page))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		m := fenceLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := docBlock{page: page, line: i + 1, lang: m[2]}
		for j := i - 1; j >= 0; j-- {
			if strings.TrimSpace(lines[j]) == "" {
				continue
			}
			if c := commentLine.FindStringSubmatch(lines[j]); c != nil {
				b.marker = c[1]
			}
			break
		}
		indent := m[1]
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if i == len(lines) {
			t.Fatalf("%s: the block opened at line %d is never closed", page, b.line)
		}
		b.body = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
	}
	return blocks
}

// marker is a block's comment, read.
type marker struct {
	kind  string   // "runnable", "tested by", "not run", "output", or "" for none
	mode  string   // runnable: go, sh, server or python
	needs []string // runnable: the programs, and py: the Python modules, it needs
	rest  string   // tested by: the tests; not run: why
}

func parseMarker(s string) marker {
	kind, rest, _ := strings.Cut(s, ":")
	m := marker{kind: strings.TrimSpace(kind), rest: strings.TrimSpace(rest)}
	if m.kind == "runnable" {
		mode, needs, _ := strings.Cut(m.rest, ";")
		m.mode = strings.TrimSpace(mode)
		if n, ok := strings.CutPrefix(strings.TrimSpace(needs), "needs"); ok {
			m.needs = strings.Fields(n)
		}
	}
	return m
}

// TestDocsBlocksAreMarked fails on a block of commands or code that does
// not say whether it is run, by which test, or why not, so that nothing in
// the documentation goes unchecked unnoticed.
func TestDocsBlocksAreMarked(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	runnable := 0
	for _, page := range docPages(t, root) {
		blocks := readBlocks(t, root, page)
		for i, b := range blocks {
			m := parseMarker(b.marker)
			if m.kind == "output" {
				if i == 0 || parseMarker(blocks[i-1].marker).mode != "go" {
					t.Errorf("%s: an output block that follows no runnable go block", b)
				}
				continue
			}
			if !slices.Contains(commandLangs, b.lang) {
				if m.kind != "" {
					t.Errorf("%s: a %q block marked %q: only %v blocks are run", b, b.lang, b.marker, commandLangs)
				}
				continue
			}
			switch m.kind {
			case "runnable":
				runnable++
				want := map[string]string{"go": "go", "sh": "sh", "server": "sh", "python": "python"}[m.mode]
				if want == "" || want != b.lang {
					t.Errorf("%s: a %s block marked %q: want runnable: go, sh, server (sh) or python", b, b.lang, b.marker)
				}
				if m.mode == "go" && !strings.HasPrefix(b.body, "package main\n") {
					t.Errorf("%s: a runnable go block is a complete main.go, and starts with package main", b)
				}
			case "tested by":
				checkTestedBy(t, root, b, m.rest)
			case "not run":
				if m.rest == "" {
					t.Errorf("%s: not run, but the marker does not say why", b)
				}
			default:
				t.Errorf("%s: a %s block without <!-- runnable: ... -->, <!-- tested by: ... --> or <!-- not run: why -->", b, b.lang)
			}
		}
	}
	if runnable < 10 {
		t.Errorf("%d runnable blocks in the README and docs/, want at least 10: is the parser reading them?", runnable)
	}
}

// checkTestedBy checks that each test a block names exists: "DIR TestA
// TestB" names tests in DIR's test files; ".ci/run" is CI itself.
// Parenthesised words are a comment.
func checkTestedBy(t *testing.T, root string, b docBlock, list string) {
	t.Helper()
	list = regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(list, "")
	if strings.TrimSpace(list) == "" {
		t.Errorf("%s: tested by nothing", b)
	}
	for _, item := range strings.Split(list, ",") {
		fields := strings.Fields(item)
		switch {
		case len(fields) == 1 && fields[0] == ".ci/run":
			if _, err := os.Stat(filepath.Join(root, ".ci", "run")); err != nil {
				t.Errorf("%s: tested by .ci/run: %v", b, err)
			}
		case len(fields) >= 2:
			files, _ := filepath.Glob(filepath.Join(root, fields[0], "*_test.go"))
			var src []byte
			for _, f := range files {
				s, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				src = append(src, s...)
			}
			for _, name := range fields[1:] {
				if !strings.Contains(string(src), "\nfunc "+name+"(t *testing.T)") {
					t.Errorf("%s: tested by %s in %s, which has no such test", b, name, fields[0])
				}
			}
		default:
			t.Errorf("%s: tested by %q: want DIR TestName ..., or .ci/run", b, item)
		}
	}
}

// TestDocsLinksResolve fails on a relative link of the README or docs/ to a
// file, or a heading, that does not exist: the pages link into each other
// by heading, and a heading renamed would leave them pointing at nothing.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	links := regexp.MustCompile(`\]\(([^()\s]+)\)|^\[[^\]]+\]:\s*(\S+)`)
	for _, page := range docPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range proseLines(string(text)) {
			for _, m := range links.FindAllStringSubmatch(line, -1) {
				target := m[1] + m[2]
				if strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				path := filepath.Join(root, page)
				if file != "" {
					path = filepath.Join(filepath.Dir(path), file)
				}
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s:%d: link to %s: %v", page, n+1, target, err)
					continue
				}
				if anchor != "" && !slices.Contains(headingAnchors(t, path), anchor) {
					t.Errorf("%s:%d: link to %s: %s has no heading #%s", page, n+1, target, file, anchor)
				}
			}
		}
	}
}

// proseLines are text's lines with fenced blocks and code spans blanked, so
// that a link is only what renders as one.
func proseLines(text string) []string {
	lines := outsideFences(text)
	span := regexp.MustCompile("`[^`]*`")
	for i, l := range lines {
		lines[i] = span.ReplaceAllString(l, "``")
	}
	return lines
}

// outsideFences are text's lines with fenced blocks blanked.
func outsideFences(text string) []string {
	lines := strings.Split(text, "\n")
	fenced := false
	for i, l := range lines {
		if fenceLine.MatchString(l) {
			fenced = !fenced
			lines[i] = ""
		} else if fenced {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors are the anchors GitHub gives the headings of the page at
// path: lower case, spaces as hyphens, punctuation dropped, and a repeated
// one numbered.
func headingAnchors(t *testing.T, path string) []string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var anchors []string
	seen := map[string]int{}
	for _, l := range outsideFences(string(text)) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var a strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				a.WriteRune(r)
			}
		}
		anchor := a.String()
		if n := seen[anchor]; n > 0 {
			anchor = fmt.Sprintf("%s-%d", anchor, n)
		}
		seen[a.String()]++
		anchors = append(anchors, anchor)
	}
	return anchors
}

// docEnv is the environment a documented command runs in: this process's,
// without any setting of the service or of AWS that would change what it
// prints, and with TMPDIR a directory of the test's own.
func docEnv(tmp string, extra ...string) []string {
	drop := []string{"STORE", "DB_PATH", "SQLITE_SHARDS", "TABLE_NAME", "DYNAMODB_ENDPOINT", "RATE_LIMIT",
		"WINDOW_SECONDS", "CLIENT_KEY_SOURCE", "FAIL_MODE", "AUDIT_RETENTION", "REJECT_CACHE", "BUSY_TIMEOUT",
		"JOURNAL_MODE", "ADDR", "POLICIES", "SHADOW", "METRICS", "METRICS_NAMESPACE", "PRUNE_INTERVAL", "ADMIN",
		"URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
		"AWS_SESSION_TOKEN", "AWS_PROFILE", "TMPDIR"}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(drop, name) && !strings.HasPrefix(name, "AWS_LAMBDA_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "TMPDIR="+tmp), extra...)
}

// missingTools reports what of needs this machine lacks: programs on PATH,
// or, as py:NAME, modules python3 imports.
func missingTools(needs []string) []string {
	var missing []string
	for _, n := range needs {
		if mod, ok := strings.CutPrefix(n, "py:"); ok {
			if exec.Command("python3", "-c", "import "+mod).Run() != nil {
				missing = append(missing, "python3 with "+mod)
			}
		} else if _, err := exec.LookPath(n); err != nil {
			missing = append(missing, n)
		}
	}
	return missing
}

// requireTools skips the test without the tools it needs, loudly, unless
// RATELIMIT_REQUIRE_TOOLS is set, as .ci/run sets it: then it fails.
func requireTools(t *testing.T, needs []string) {
	t.Helper()
	if missing := missingTools(needs); len(missing) > 0 {
		msg := fmt.Sprintf("SKIPPED, not run: this machine has no %s", strings.Join(missing, ", "))
		if os.Getenv("RATELIMIT_REQUIRE_TOOLS") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// TestDocsGoProgramsBuild builds every runnable Go block as the README
// says to: in a new directory, go mod init, go get, go mod tidy. The one
// substitution: where the README says go get github.com/ft251/ratelimit@latest,
// the test requires the module and replaces it with this checkout, so that
// it builds the code beside it, with the sums of this repository's go.sum.
// The modules a new program's go mod tidy needs beyond what this module's
// own build downloaded (the tests' modules of its dependencies, such as
// ginkgo for the API proxy's) come as they do for a user: from GOPROXY,
// once, into the module cache. Offline (GOPROXY=off) a new machine's cache
// lacks them, and the test failed there. A block followed by an output block is run, and
// must print it.
func TestDocsGoProgramsBuild(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	steps := goSteps(t, root)
	built := 0
	for _, page := range docPages(t, root) {
		blocks := readBlocks(t, root, page)
		for i, b := range blocks {
			if parseMarker(b.marker).mode != "go" {
				continue
			}
			built++
			t.Run(b.String(), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(b.body), 0o644); err != nil {
					t.Fatal(err)
				}
				gosum, err := os.ReadFile(filepath.Join(root, "go.sum"))
				if err != nil {
					t.Fatal(err)
				}
				// TMPDIR apart: the go command ignores a go.mod at the
				// root of the temporary directory.
				env := append(docEnv(t.TempDir()), "GOFLAGS=-mod=mod")
				for _, step := range steps {
					args := strings.Fields(step)
					switch {
					case step == "go get github.com/ft251/ratelimit@latest":
						// The checkout stands in for the latest version.
						args = []string{"go", "mod", "edit", "-require=github.com/ft251/ratelimit@v0.0.0-00010101000000-000000000000",
							"-replace=github.com/ft251/ratelimit=" + root}
						if err := os.WriteFile(filepath.Join(dir, "go.sum"), gosum, 0o644); err != nil {
							t.Fatal(err)
						}
					case step == "go run .":
						// A server that would run until stopped: built
						// (and vetted) instead.
						run(t, dir, env, "go", "vet", ".")
						args = []string{"go", "build", "-o", "prog", "."}
					}
					run(t, dir, env, args...)
				}
				if i+1 < len(blocks) && parseMarker(blocks[i+1].marker).kind == "output" {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					cmd := exec.CommandContext(ctx, filepath.Join(dir, "prog"))
					cmd.Dir, cmd.Env = dir, env
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Fatalf("%s: %v\n%s", b, err, out)
					}
					if diff := compareOutput(blocks[i+1].body, string(out)); diff != "" {
						t.Errorf("%s prints, against %s:\n%s", b, blocks[i+1], diff)
					}
				}
			})
		}
	}
	if built < 3 {
		t.Errorf("%d runnable go blocks, want at least 3 (the README's two and the middleware's)", built)
	}
}

// goSteps are the commands of the README's block of go get steps (the one
// tested by TestDocsGoProgramsBuild), which must make a module, get this
// one, tidy and run.
func goSteps(t *testing.T, root string) []string {
	t.Helper()
	for _, b := range readBlocks(t, root, "README.md") {
		if m := parseMarker(b.marker); m.kind != "tested by" || !strings.Contains(m.rest, "TestDocsGoProgramsBuild") {
			continue
		}
		var steps []string
		for _, l := range strings.Split(b.body, "\n") {
			if l, _, _ = strings.Cut(l, "#"); strings.TrimSpace(l) != "" {
				steps = append(steps, strings.Join(strings.Fields(l), " "))
			}
		}
		if len(steps) != 4 || !strings.HasPrefix(steps[0], "go mod init ") || steps[1] != "go get github.com/ft251/ratelimit@latest" ||
			steps[2] != "go mod tidy" || steps[3] != "go run ." {
			t.Fatalf("%s: the steps are %q; want go mod init NAME, go get github.com/ft251/ratelimit@latest, go mod tidy, go run .", b, steps)
		}
		return steps
	}
	t.Fatal("README.md has no block of go get steps tested by TestDocsGoProgramsBuild")
	return nil
}

func run(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Env = dir, env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// compareOutput compares what a command printed with what the
// documentation says it prints, line by line, where … stands for any text
// within a line and trailing spaces do not count. It returns "" when they
// agree.
func compareOutput(want, got string) string {
	split := func(s string) []string {
		lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
		for i := range lines {
			lines[i] = strings.TrimRight(lines[i], " \t\r")
		}
		return lines
	}
	w, g := split(want), split(got)
	ok := len(w) == len(g)
	for i := 0; ok && i < len(w); i++ {
		parts := strings.Split(w[i], "…")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		ok = regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(g[i])
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("want:\n%s\ngot:\n%s", strings.Join(w, "\n"), strings.Join(g, "\n"))
}

// TestDocsCommandsRun runs the runnable shell and Python blocks of the
// README and of each page of docs/, in the page's order, at the
// repository's root: a server block is started and serves the blocks after
// it, on a free port that stands in for the 3000 (or the example's 3001)
// they name; a session's commands must print what the page shows; a
// script must succeed. The README's check of the deploy without AWS runs
// here as written.
func TestDocsCommandsRun(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	for _, page := range docPages(t, root) {
		blocks := movePorts(t, readBlocks(t, root, page))
		if !slices.ContainsFunc(blocks, func(b docBlock) bool {
			m := parseMarker(b.marker)
			return m.kind == "runnable" && m.mode != "go"
		}) {
			continue
		}
		t.Run(page, func(t *testing.T) {
			t.Parallel()
			pageT := t
			var srv *docServer
			serverSkipped := false
			defer func() { srv.stop(pageT) }()
			for _, b := range blocks {
				m := parseMarker(b.marker)
				if m.kind != "runnable" || m.mode == "go" {
					continue
				}
				t.Run(fmt.Sprint(b.line), func(t *testing.T) {
					if m.mode == "server" {
						srv.stop(pageT)
						srv, serverSkipped = nil, true
						requireTools(t, m.needs)
						srv, serverSkipped = startDocServer(t, pageT, root, b), false
						return
					}
					if serverSkipped {
						t.Skip("SKIPPED: the server it runs against was not started")
					}
					needs := m.needs
					if m.mode == "python" {
						needs = append([]string{"python3"}, needs...)
					}
					requireTools(t, needs)
					runDocBlock(t, root, b, m.mode, srv)
				})
			}
		})
	}
}

// docServer is a server block running in a process group of its own.
type docServer struct {
	block docBlock
	addr  string
	cmd   *exec.Cmd
	out   *lockedBuffer
	done  chan struct{}
}

// startDocServer starts a server block with ADDR a free port and DB_PATH a
// temporary file of pageT's, which outlives the block's own test, and waits
// until it says it listens.
func startDocServer(t, pageT *testing.T, root string, b docBlock) *docServer {
	t.Helper()
	tmp := pageT.TempDir()
	s := &docServer{block: b, addr: freeAddrs(t, 1)[0], out: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command("bash", "-c", b.body)
	s.cmd.Dir = root
	s.cmd.Env = docEnv(tmp, "ADDR="+s.addr, "DB_PATH="+filepath.Join(tmp, "ratelimit.db"))
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	listening := regexp.MustCompile(`"msg":"listening"|\blistening on http://`)
	deadline := time.After(3 * time.Minute) // go run may compile first
	for !listening.MatchString(s.out.String()) {
		select {
		case <-s.done:
			t.Fatalf("%s: the server exited before it listened:\n%s", b, s.out)
		case <-deadline:
			s.stop(t)
			t.Fatalf("%s: the server did not say it listens within 3 minutes:\n%s", b, s.out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return s
}

// stop ends the server's process group (go run's child, and what the block
// started in the background), and waits until it is gone.
func (s *docServer) stop(t *testing.T) {
	if s == nil {
		return
	}
	killGroup(s.cmd.Process.Pid)
	<-s.done
	if t.Failed() {
		t.Logf("%s: the server's output:\n%s", s.block, s.out)
	}
}

// killGroup ends the process group pgid: SIGTERM, then SIGKILL for what
// is left after 10 s, and waits a little for it to go (a member that no
// process reaps would stay a zombie, so the wait is bounded).
func killGroup(pgid int) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	for i := 0; i < 150 && syscall.Kill(-pgid, 0) == nil; i++ {
		if i == 100 {
			syscall.Kill(-pgid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fixedPort is how a block names a port it listens on that is not the
// local server's: the Lambda emulator's 9000 and moto's 5000, as
// host:port or as Python's ("127.0.0.1", 5000).
var fixedPort = regexp.MustCompile(`\b127\.0\.0\.1(:|", )(5000|9000)\b`)

// movePorts gives each fixed port a page's blocks name a free port of its
// own, the same in every block of the page, so that the page runs beside
// another checkout's run and beside whatever else listens on 9000 or 5000.
func movePorts(t *testing.T, blocks []docBlock) []docBlock {
	moved := map[string]string{}
	for i, b := range blocks {
		blocks[i].body = fixedPort.ReplaceAllStringFunc(b.body, func(s string) string {
			m := fixedPort.FindStringSubmatch(s)
			if moved[m[2]] == "" {
				_, port, _ := net.SplitHostPort(freeAddrs(t, 1)[0])
				moved[m[2]] = port
			}
			return "127.0.0.1" + m[1] + moved[m[2]]
		})
	}
	return blocks
}

// serverPort is how a block names the local server: the local server's
// default port, or the example's.
var serverPort = regexp.MustCompile(`\b(localhost|127\.0\.0\.1):300[01]\b`)

// runDocBlock runs one sh or python block, against srv if the page has
// one: its address for the port the block names, in URL too, with
// placeholder AWS credentials for the signed requests (the local servers
// check no signature).
func runDocBlock(t *testing.T, root string, b docBlock, mode string, srv *docServer) {
	tmp := t.TempDir()
	var extra []string
	body, at := b.body, func(s string) string { return s }
	if srv != nil {
		at = func(s string) string { return serverPort.ReplaceAllString(s, srv.addr) }
		extra = append(extra, "URL=http://"+srv.addr, "AWS_REGION=us-east-1", "AWS_DEFAULT_REGION=us-east-1",
			"AWS_ACCESS_KEY_ID=AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY=placeholder", "AWS_SESSION_TOKEN=placeholder")
	}
	env := docEnv(tmp, extra...)
	var args []string
	var session []sessionCommand
	switch {
	case mode == "python":
		args = []string{"python3", "-c", at(body)}
	case strings.HasPrefix(body, "$ "):
		// The commands name the server; what they print is as shown.
		session = parseSession(t, b, body)
		args = []string{"bash", "-c", sessionScript(session, at)}
	default:
		args = []string{"bash", "-e", "-u", "-o", "pipefail", "-c", at(body)}
	}
	out, err := runGroup(t, root, env, tmp, args)
	if failed := t.Failed(); err != nil || failed {
		logFiles(t, tmp)
	}
	if session == nil {
		if err != nil {
			t.Fatalf("%s: %v\n%s", b, err, out)
		}
		return
	}
	// The output is each command's, after a mark of its own.
	got := strings.Split(out, "\n"+sessionMark+"\n")
	if len(got) != len(session)+2 || got[0] != "" {
		logFiles(t, tmp)
		t.Fatalf("%s: the session did not run to its end (%v):\n%s", b, err, out)
	}
	for i, c := range session {
		if diff := compareOutput(c.want, got[i+1]); diff != "" {
			t.Errorf("%s: $ %s\n%s", b, c.command, diff)
		}
	}
	if t.Failed() {
		logFiles(t, tmp)
	}
}

// sessionCommand is one "$ " command of a session and what it prints.
type sessionCommand struct {
	command string // with its continuation lines
	want    string
}

func parseSession(t *testing.T, b docBlock, body string) []sessionCommand {
	t.Helper()
	var cmds []sessionCommand
	continued := false
	for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
		switch {
		case continued:
			cmds[len(cmds)-1].command += "\n" + l
		case strings.HasPrefix(l, "$ "):
			cmds = append(cmds, sessionCommand{command: strings.TrimPrefix(l, "$ ")})
		case len(cmds) == 0:
			t.Fatalf("%s: a session starts with a $ command", b)
		default:
			cmds[len(cmds)-1].want += l + "\n"
		}
		continued = len(cmds) > 0 && strings.HasSuffix(l, "\\") && (continued || strings.HasPrefix(l, "$ "))
	}
	return cmds
}

// sessionMark separates the output of a session's commands. It is printed
// on a line of its own after a newline, so that an output without a last
// newline ends before it.
const sessionMark = "@@ docs_test: next command @@"

// sessionScript is one bash run of a session's commands, as typed into
// one terminal: their variables and background jobs carry over, and each
// prints both its outputs, as a terminal shows them.
func sessionScript(cmds []sessionCommand, at func(string) string) string {
	var s strings.Builder
	s.WriteString("exec 2>&1\n")
	for _, c := range cmds {
		fmt.Fprintf(&s, "printf '\\n%%s\\n' '%s'\n%s\n", sessionMark, at(c.command))
	}
	fmt.Fprintf(&s, "printf '\\n%%s\\n' '%s'\n", sessionMark)
	return s.String()
}

// runGroup runs args at dir in a process group of its own, with its output
// in a file (not a pipe, which a job left in the background would hold
// open), and then ends whatever of the group is left.
func runGroup(t *testing.T, dir string, env []string, tmp string, args []string) (string, error) {
	t.Helper()
	f, err := os.CreateTemp(tmp, "output-")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	if cmd.Process != nil {
		killGroup(cmd.Process.Pid)
	}
	out, rerr := os.ReadFile(f.Name())
	if rerr != nil {
		t.Fatal(rerr)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("still running after 5 minutes: %w", err)
	}
	return string(out), err
}

// logFiles logs the *.log files a block left in its temporary directory
// (the emulator's, in the check of the deploy), for a failure.
func logFiles(t *testing.T, tmp string) {
	filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".log") {
			f, err := os.Open(path)
			if err != nil {
				return nil
			}
			defer f.Close()
			var lines []string
			for sc := bufio.NewScanner(f); sc.Scan(); {
				lines = append(lines, sc.Text())
			}
			t.Logf("%s:\n%s", path, strings.Join(lines, "\n"))
		}
		return nil
	})
}
