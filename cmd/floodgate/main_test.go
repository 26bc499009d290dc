package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/redistest"
)

func TestMain(m *testing.M) {
	redistest.Main(m)
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

var (
	binOnce sync.Once
	binDir  string // holds the floodgate binary that the tests built
	binErr  error
)

// floodgateBinary builds the floodgate command once per test binary, for
// the tests that run it as a shell script would, and returns its path.
func floodgateBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "floodgate-test-bin")
		if binErr != nil {
			return
		}
		// go test puts its own GOROOT/bin first on the test's PATH: this
		// is the go command that is running the test.
		// GOFLAGS=-buildvcs=auto records the commit, for version, where
		// the environment turns it off.
		cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, "floodgate"), ".")
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=auto")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "floodgate")
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderrPart string
	}{
		{"no arguments", nil, exitUsage, "", "Usage: floodgate COMMAND"},
		{"unknown command", []string{"simulat"}, exitUsage, "", "floodgate: unknown command \"simulat\"; did you mean \"simulate\"?\n\nUsage: floodgate COMMAND"},
		{"help", []string{"help"}, exitOK, usage(), ""},
		{"-h", []string{"-h"}, exitOK, usage(), ""},
		{"--help", []string{"--help"}, exitOK, usage(), ""},
		{"help with a command", []string{"help", "simulate"}, exitOK, simulateUsage, ""},
		{"help with an unknown command", []string{"help", "nope"}, exitUsage, "", `unknown command "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code || stdout.String() != tt.stdout || !strings.Contains(stderr.String(), tt.stderrPart) ||
				tt.stderrPart == "" && stderr.Len() > 0 {
				t.Errorf("run(%q) = %d\nstdout:\n%s\nstderr:\n%s\nwant %d, stdout %q, stderr containing %q",
					tt.args, code, &stdout, &stderr, tt.code, tt.stdout, tt.stderrPart)
			}
		})
	}
}

func TestUsageListsCommands(t *testing.T) {
	const want = `Usage: floodgate COMMAND [ARGUMENTS]

Commands:
  check      decide one event for a shell script (exit status 0 or 1)
  client     ask a running floodgate serve (check, reset, policies)
  filter     pass the lines of standard input that a limit admits
  serve      run the rate-limit service (HTTP JSON, Envoy's gRPC, metrics)
  simulate   replay a trace through a policy with simulated time
  version    print floodgate's version

Run 'floodgate COMMAND -h' for a command's usage.
`
	if got := usage(); got != want {
		t.Errorf("usage() =\n%s\nwant\n%s", got, want)
	}
}

// The binary built from this tree names floodgate.Version, its commit (go
// build records the VCS state, in a clone) and its Go version; a source
// tree's module version, "(devel)", is not printed.
func TestVersion(t *testing.T) {
	want := regexp.MustCompile(`^floodgate ` + regexp.QuoteMeta(floodgate.Version) + `( commit [0-9a-f]{12} \S+( \(modified\))?)? go1\.\d+\S*$`)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(floodgateBinary(t), args...).CombinedOutput()
		line := strings.TrimSpace(string(out))
		if err != nil || !want.MatchString(line) {
			t.Errorf("floodgate %s: %v %q", args[0], err, line)
		}
		// Go records no commit in a git worktree, nor outside a repository.
		if rev, gerr := exec.Command("git", "rev-parse", "HEAD").Output(); gerr == nil && strings.Contains(line, " commit ") &&
			!strings.Contains(line, string(rev[:12])) {
			t.Errorf("floodgate %s: %q does not name HEAD, %.12s", args[0], line, rev)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version", "x"}, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
		t.Errorf("version x: exit %d, want %d", code, exitUsage)
	}
}

// A binary that go install built from a tag or a commit names that module
// version beside floodgate.Version, unless they are the same.
func TestVersionLineModule(t *testing.T) {
	for _, c := range []struct{ module, want string }{
		{"(devel)", "floodgate " + floodgate.Version + " go1.26.0"},
		{floodgate.Version, "floodgate " + floodgate.Version + " go1.26.0"},
		{"v0.0.0-20261128101500-0123456789ab", "floodgate " + floodgate.Version + " (module v0.0.0-20261128101500-0123456789ab) go1.26.0"},
	} {
		bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: c.module}}
		if got := versionLine(bi); got != c.want {
			t.Errorf("module %s: %q, want %q", c.module, got, c.want)
		}
	}
}
