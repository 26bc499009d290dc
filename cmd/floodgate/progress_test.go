package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// withProgressConfig makes simulate see pc until the test ends.
func withProgressConfig(t *testing.T, pc progressConfig) {
	old := simulateProgress
	simulateProgress = pc
	t.Cleanup(func() { simulateProgress = old })
}

// TestSimulateProgress runs simulate on a trace file with the terminal
// check replaced, and looks for the bar on standard error.
func TestSimulateProgress(t *testing.T) {
	var trace strings.Builder
	for i := range 20_000 { // 300 KB, more than the trace reader's 64 KiB buffer
		fmt.Fprintf(&trace, "%d.%03d user%d\n", i/1000, i%1000, i%7)
	}
	path := filepath.Join(t.TempDir(), "big.trace")
	if err := os.WriteFile(path, []byte(trace.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	size := int64(trace.Len())
	var stdout, stderr bytes.Buffer
	terminal := func(ws ...io.Writer) func(io.Writer) bool {
		return func(w io.Writer) bool {
			for _, t := range ws {
				if w == t {
					return true
				}
			}
			return false
		}
	}
	tests := []struct {
		name    string
		pc      progressConfig
		args    []string
		stdin   bool // the trace on standard input, not as FILE
		wantBar bool
	}{
		{"stderr a terminal", progressConfig{size, terminal(&stderr)}, nil, false, true},
		{"stderr a terminal, --summary", progressConfig{0, terminal(&stderr)}, []string{"--summary"}, false, true},
		{"no terminal", progressConfig{0, terminal()}, nil, false, false},
		{"a smaller file", progressConfig{size + 1, terminal(&stderr)}, nil, false, false},
		{"not a file", progressConfig{0, terminal(&stderr)}, nil, true, false},
		{"the event lines on the terminal too", progressConfig{0, terminal(&stderr, &stdout)}, nil, false, false},
		{"the terminal, -q", progressConfig{0, terminal(&stderr, &stdout)}, []string{"-q"}, false, true},
		{"the real check", progressConfig{0, isTerminal}, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withProgressConfig(t, tt.pc)
			stdout.Reset()
			stderr.Reset()
			args := append([]string{"simulate", "--policy", "token-bucket 100/1s"}, tt.args...)
			var stdin io.Reader = strings.NewReader("")
			if tt.stdin {
				stdin = strings.NewReader(trace.String())
			} else {
				args = append(args, path)
			}
			if code := run(args, stdin, &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d, stderr:\n%s", code, &stderr)
			}
			if want := strings.Count(trace.String(), "\n"); !slices.Contains(tt.args, "-q") && !slices.Contains(tt.args, "--summary") && strings.Count(stdout.String(), "\n") != want {
				t.Errorf("%d event lines, want %d", strings.Count(stdout.String(), "\n"), want)
			}
			got := stderr.String()
			if !tt.wantBar {
				if got != "" {
					t.Errorf("stderr %q, want nothing", got)
				}
				return
			}
			// A bar at 0% is drawn at once, then erased at the end with
			// spaces between carriage returns.
			if !strings.HasPrefix(got, "\rreading big.trace   0% |") {
				t.Errorf("stderr starts %q, want the bar at 0%%", got[:min(len(got), 40)])
			}
			i := strings.LastIndexByte(got[:len(got)-1], '\r')
			if !strings.HasSuffix(got, "\r") || i < 0 || strings.Trim(got[i+1:len(got)-1], " ") != "" || len(got)-i < 30 {
				t.Errorf("stderr ends %q, want the bar erased", got[max(0, len(got)-120):])
			}
		})
	}
}

// TestProgressClearedOnError checks that a trace with an error erases the
// bar before the error is printed.
func TestProgressClearedOnError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.trace")
	if err := os.WriteFile(path, []byte(strings.Repeat("1 a\n", 50_000)+"x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	withProgressConfig(t, progressConfig{0, func(w io.Writer) bool { return w == &stderr }})
	code := run([]string{"simulate", "--policy", "token-bucket 1/1s", "-q", path}, strings.NewReader(""), io.Discard, &stderr)
	got := stderr.String()
	const msg = "floodgate simulate: line 50001: t \"x\": invalid number (want seconds like 12.5, 0.001 or 1.5e3)\n"
	before, ok := strings.CutSuffix(got, msg)
	if code != exitUsage || !ok || !strings.HasPrefix(got, "\rreading bad.trace") || !strings.HasSuffix(before, "\r") ||
		strings.Trim(before[strings.LastIndexByte(before[:len(before)-1], '\r')+1:len(before)-1], " ") != "" {
		t.Errorf("exit %d, stderr %q", code, got)
	}
}
