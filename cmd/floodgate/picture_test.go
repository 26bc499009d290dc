package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlotFormat(t *testing.T) {
	tests := []struct {
		name, want, err string
	}{
		{"a.svg", "svg", ""},
		{"dir.d/A.SVG", "svg", ""},
		{"a.png", "png", ""},
		{"a.Png", "png", ""},
		{"a.gif", "", `--plot "a.gif": unknown picture format ".gif" (want a .svg or .png file)`},
		{"a.svg.gz", "", `--plot "a.svg.gz": unknown picture format ".gz" (want a .svg or .png file)`},
		{"svg", "", `--plot "svg": no extension (want a .svg or .png file)`},
		{"", "", `--plot "": no extension (want a .svg or .png file)`},
	}
	for _, tt := range tests {
		got, err := plotFormat(tt.name)
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && err.Error() != tt.err {
			t.Errorf("plotFormat(%q) = %q, %v; want %q, %s", tt.name, got, err, tt.want, tt.err)
		}
	}
}

func TestPendingFileDiscard(t *testing.T) {
	dir := t.TempDir()
	pf, err := createPending(filepath.Join(dir, "x.svg"))
	if err != nil {
		t.Fatal(err)
	}
	err = pf.write(func(w io.Writer) error {
		io.WriteString(w, "half")
		return errors.New("drawing failed")
	})
	pf.discard()
	if err == nil || err.Error() != "drawing failed" {
		t.Errorf("write: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left: %v", entries)
	}
}

// TestSimulatePlotNotBuilt checks that a floodgate built without the plot
// tag refuses --plot before it reads the trace, saying how to get it.
func TestSimulatePlotNotBuilt(t *testing.T) {
	if plotBuilt {
		t.Skip("built with the plot tag")
	}
	picture := filepath.Join(t.TempDir(), "a.svg")
	code, stdout, stderr := simulateRun([]string{"simulate", "--policy", "sliding-log 1/1s", "--plot", picture}, "0 a\n")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "built without plotting") || !strings.Contains(stderr, "-tags plot") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d and how to build with plotting", code, stdout, stderr, exitUsage)
	}
	if _, err := os.Stat(picture); err == nil {
		t.Errorf("the picture was written")
	}
}
