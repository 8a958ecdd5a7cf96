package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"testing"

	"github.com/ft251/ratelimit/internal/testbin"
)

func TestVersionLineIsTheModuleVersion(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		bi   *debug.BuildInfo
		want string
	}{
		// go install github.com/ft251/ratelimit/cmd/local-api@v0.1.0
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/ft251/ratelimit", Version: "v0.1.0"}}, "local-api v0.1.0 go1.26.8"},
		// go build in a checkout with uncommitted changes
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.1-0.20261201210238-5db59e106325+dirty"}}, "local-api v0.1.1-0.20261201210238-5db59e106325+dirty go1.26.8"},
		{nil, "local-api: the binary records no build information"},
	} {
		if got := versionLine(c.bi); got != c.want {
			t.Errorf("versionLine(%+v) = %q, want %q", c.bi, got, c.want)
		}
	}
}

// TestVersionFlagPrintsTheBuildsVersion runs -version on a built binary:
// whatever the go command recorded (here, in a checkout, a pseudo-version
// or "(devel)"), one line, exit 0, and nothing else done (no database).
func TestVersionFlagPrintsTheBuildsVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := testbin.Build(t, testbin.Spec{Dir: ".", Pkg: "."})
	cmd := exec.Command(bin, "-version")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !regexp.MustCompile(`^local-api (\(devel\)|v\d+\.\d+\.\d+\S*) go1\.\d+\S*\n$`).Match(out) {
		t.Errorf("local-api -version: %v, %q; want one line with the module's version and Go's", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("-version created the database directory: %v", err)
	}
}
