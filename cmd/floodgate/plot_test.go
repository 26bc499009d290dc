//go:build plot

package main

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// plotTrace has four keys: c the busiest (6 events), then "a&b <c>" and
// bob (3 each, in key order), then d; c and "a&b <c>" are refused.
const plotTrace = `0 c
0 bob
0.1 c
0.2 c
0.3 c
{"t": 0.3, "key": "a&b <c>"}
{"t": 0.4, "key": "a&b <c>"}
{"t": 0.5, "key": "a&b <c>"}
1 bob
2 bob
3 d
5 c
9 c
`

// svgText returns the text of every element of the SVG document doc, after
// checking that it is well-formed XML.
func svgText(t *testing.T, doc []byte) []string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	var texts []string
	var root string
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if root != "svg" {
		t.Fatalf("the root element is <%s>, want <svg>", root)
	}
	return texts
}

func TestSimulatePlotSVG(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "run.svg")
	code, stdout, stderr := simulateRun([]string{"simulate", "--policy", "token-bucket 2/1s burst=2", "--plot", out, "--plot-keys", "3"}, plotTrace)
	if code != 0 || stderr != "" || strings.Count(stdout, "\n") != 13 {
		t.Fatalf("exit %d, stderr:\n%s\nstdout (want the 13 event lines):\n%s", code, stderr, stdout)
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(doc, []byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")) {
		t.Error("the SVG's fonts have no fallback")
	}
	texts := svgText(t, doc)
	for _, want := range []string{
		"floodgate simulate --policy 'token-bucket 2/1s'", // the canonical form
		"the 3 keys with the most events, of 4; in all 13 events, 3 refused",
		"c: 6 events, 2 refused",
		"a&b <c>: 3 events, 1 refused",
		"bob: 3 events, 0 refused",
		"admitted", "refused", "burst = 2",
		"t (seconds)", "units in use",
	} {
		if !slices.Contains(texts, want) {
			t.Errorf("no text %q in the SVG; its texts are %q", want, texts)
		}
	}
	for _, s := range texts {
		if strings.HasPrefix(s, "d:") {
			t.Errorf("the 4th key is drawn: %q", s)
		}
	}
	// The panels, top down, in the order of their events.
	var order []int
	for _, title := range []string{"c: ", "a&b <c>: ", "bob: "} {
		order = append(order, slices.IndexFunc(texts, func(s string) bool { return strings.HasPrefix(s, title) }))
	}
	if !slices.IsSorted(order) {
		t.Errorf("panels in the wrong order: titles at %v", order)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %q", leftovers)
	}
}

// TestSimulatePlotKeys draws keys that XML cannot hold as they are.
func TestSimulatePlotKeys(t *testing.T) {
	const in = `{"t": 0, "key": "tab\there"}
{"t": 0, "key": "bell\u0007"}
` + "0 \xff\xfe\n" + `{"t": 0, "key": "]]> <!-- & \"quoted\""}
{"t": 0, "key": "\"quoted\""}
{"t": 0, "key": ""}
`
	out := filepath.Join(t.TempDir(), "keys.svg")
	code, _, stderr := simulateRun([]string{"simulate", "--policy", "fixed-window 1/1s", "-q", "--plot", out, "--plot-keys", "10"},
		in)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	texts := svgText(t, doc)
	for _, want := range []string{
		`"tab\there": 1 event, 0 refused`,
		`"bell\a": 1 event, 0 refused`,
		`"\xff\xfe": 1 event, 0 refused`,
		`]]> <!-- & "quoted": 1 event, 0 refused`,
		`"\"quoted\"": 1 event, 0 refused`,
		`"": 1 event, 0 refused`,
	} {
		if !slices.Contains(texts, want) {
			t.Errorf("no text %q in the SVG; its texts are %q", want, texts)
		}
	}
}

func TestPlotKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"alice", "alice"},
		{"GET /a b", "GET /a b"},
		{"", `""`},
		{`"x"`, `"\"x\""`},
		{"a\nb", `"a\nb"`},
		{"\xff", `"\xff"`},
		{strings.Repeat("é", 70), strings.Repeat("é", 59) + "…"},
	}
	for _, tt := range tests {
		if got := plotKey(tt.in); got != tt.want {
			t.Errorf("plotKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSimulatePlotPNG(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		height int
	}{
		{"default 4 keys", nil, 80 + 4*220},
		{"2 keys", []string{"--plot-keys", "2"}, 80 + 2*220},
		{"fewer keys than asked", []string{"--plot-keys", "50"}, 80 + 4*220},
		{"one key", []string{"--plot-keys=1"}, 80 + 220},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run.PNG")
			args := append([]string{"simulate", "--policy", "sliding-window 2/1s", "-q", "--plot", out}, tt.args...)
			code, stdout, stderr := simulateRun(args, plotTrace)
			if code != 0 || stdout != "" || stderr != "" {
				t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatal(err)
			}
			if b := img.Bounds(); b.Dx() != 1000 || b.Dy() != tt.height {
				t.Errorf("the picture is %dx%d, want 1000x%d", b.Dx(), b.Dy(), tt.height)
			}
		})
	}
}

// TestSimulatePlotClock draws an access log: the time axis is in UTC.
func TestSimulatePlotClock(t *testing.T) {
	const log = `10.0.0.1 - - [18/Nov/2025:09:00:00 +0100] "GET / HTTP/1.1" 200 5
10.0.0.2 - - [18/Nov/2025:09:04:30 +0100] "GET / HTTP/1.1" 200 5
10.0.0.1 - - [18/Nov/2025:09:09:59 +0100] "GET / HTTP/1.1" 200 5
`
	out := filepath.Join(t.TempDir(), "log.svg")
	code, _, stderr := simulateRun([]string{"simulate", "--input-format", "clf", "--policy", "fixed-window 1/1m", "-q", "--plot", out}, log)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	texts := svgText(t, doc)
	for _, want := range []string{"time (UTC) on Tuesday 18 November 2025", "08:01", "08:09", "10.0.0.1: 2 events, 0 refused", "limit = 1"} {
		if !slices.Contains(texts, want) {
			t.Errorf("no text %q in the SVG; its texts are %q", want, texts)
		}
	}
}

// TestSimulateOutputs checks what goes to standard output with each
// combination of --summary, --plot and -q, and that the picture is
// written whenever --plot is given.
func TestSimulateOutputs(t *testing.T) {
	const in = "0 a\n0 a\n"
	const events = `{"t":0,"key":"a","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":1}
{"t":0,"key":"a","n":1,"allowed":false,"remaining":0,"retry_after":1,"reset_after":1}
`
	const table = `KEY    EVENTS  ADMITTED  REFUSED  UNITS_ADMITTED  UNITS_REFUSED  FIRST_REFUSAL  LONGEST_RETRY
a      2       1         1        1               1              0              1s
TOTAL  2       1         1        1               1              0              1s
`
	tests := []struct {
		name   string
		args   []string
		stdout string
	}{
		{"plain", nil, events},
		{"--summary", []string{"--summary"}, table},
		{"-q", []string{"-q"}, ""},
		{"--quiet", []string{"--quiet"}, ""},
		{"--summary -q", []string{"--summary", "-q"}, table},
		{"--plot", []string{"--plot", "PICTURE"}, events},
		{"--plot -q", []string{"--plot", "PICTURE", "-q"}, ""},
		{"--plot --summary", []string{"--plot", "PICTURE", "--summary"}, table},
		{"--plot --summary --quiet", []string{"--plot", "PICTURE", "--summary", "--quiet"}, table},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			picture := filepath.Join(t.TempDir(), "a.svg")
			args := []string{"simulate", "--policy", "sliding-log 1/1s"}
			for _, a := range tt.args {
				args = append(args, strings.ReplaceAll(a, "PICTURE", picture))
			}
			code, stdout, stderr := simulateRun(args, in)
			if code != 0 || stdout != tt.stdout || stderr != "" {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant stdout:\n%s", code, stdout, stderr, tt.stdout)
			}
			_, err := os.Stat(picture)
			if plotted := slices.Contains(tt.args, "--plot"); plotted != (err == nil) {
				t.Errorf("picture written: %v, want %v", err == nil, plotted)
			}
		})
	}
}

// TestSimulatePlotNotOnError checks that a trace with an error leaves
// neither the picture nor a temporary file, and that an existing picture
// is left as it was.
func TestSimulatePlotNotOnError(t *testing.T) {
	dir := t.TempDir()
	picture := filepath.Join(dir, "old.png")
	if err := os.WriteFile(picture, []byte("an older picture"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := simulateRun([]string{"simulate", "--policy", "sliding-log 1/1s", "--summary", "--plot", picture}, "0 a\n1 a b c\n")
	const want = `floodgate simulate: line 2: malformed line: 4 fields, want T [KEY [N]] (write a key with spaces in JSON: {"t": 1, "key": "a b"})` + "\n"
	if code != exitUsage || stdout != "" || stderr != want {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d, stderr:\n%s", code, stdout, stderr, exitUsage, want)
	}
	if got, err := os.ReadFile(picture); err != nil || string(got) != "an older picture" {
		t.Errorf("the picture is now %q, %v", got, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("files left in the directory: %v", entries)
	}
}

// TestSimulatePlotUnwritable checks that a picture that cannot be written
// fails the run before the trace is read, naming the path given (not the
// temporary file it is written to first).
func TestSimulatePlotUnwritable(t *testing.T) {
	picture := filepath.Join(t.TempDir(), "missing", "a.svg")
	var stdout, stderr bytes.Buffer
	in := &readCounter{r: strings.NewReader("0 a\n")}
	code := run([]string{"simulate", "--policy", "sliding-log 1/1s", "--plot", picture}, in, &stdout, &stderr)
	if want := "floodgate simulate: --plot: " + picture + ": no such file or directory\n"; code != exitFailure || stdout.Len() > 0 ||
		stderr.String() != want || in.reads > 0 {
		t.Errorf("exit %d, %d reads of the trace\nstdout:\n%s\nstderr:\n%s\nwant exit %d, no read, %q", code, in.reads, &stdout, &stderr, exitFailure, want)
	}
}

// readCounter counts the reads of r.
type readCounter struct {
	r     io.Reader
	reads int
}

func (c *readCounter) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// TestWritePlotEmpty draws a trace without events: a header and no panel.
func TestWritePlotEmpty(t *testing.T) {
	out := filepath.Join(t.TempDir(), "empty.svg")
	code, _, stderr := simulateRun([]string{"simulate", "--policy", "token-bucket 1/1s", "-q", "--plot", out}, "# nothing\n")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	doc, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if texts := svgText(t, doc); !slices.Contains(texts, "every key: 0 keys; in all 0 events, 0 refused") {
		t.Errorf("texts %q", texts)
	}
}

func TestClockTicks(t *testing.T) {
	const t0 = 1_763_452_800 // 2025-11-18 08:00:00 UTC
	tests := []struct {
		name     string
		min, max float64
		want     []string
	}{
		{"ten minutes", t0 + 3, t0 + 599, []string{"08:01", "08:02", "08:03", "08:04", "08:05", "08:06", "08:07", "08:08", "08:09"}},
		{"a minute", t0 + 1, t0 + 61, []string{"08:00:10", "08:00:20", "08:00:30", "08:00:40", "08:00:50", "08:01:00"}},
		{"a day and more", t0, t0 + 86400 + 3600, []string{"18 Nov 09:00", "18 Nov 12:00", "18 Nov 15:00", "18 Nov 18:00", "18 Nov 21:00", "19 Nov 00:00", "19 Nov 03:00", "19 Nov 06:00", "19 Nov 09:00"}},
		{"a month", t0, t0 + 30*86400, []string{"20 Nov", "24 Nov", "28 Nov", "2 Dec", "6 Dec", "10 Dec", "14 Dec", "18 Dec"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, tk := range (clockTicks{}).Ticks(tt.min, tt.max) {
				got = append(got, tk.Label)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("labels %q, want %q", got, tt.want)
			}
		})
	}
	// Under five seconds: DefaultTicks, labelled to the millisecond.
	for _, tk := range (clockTicks{}).Ticks(t0+0.1, t0+0.9) {
		if tk.Label != "" && !strings.HasPrefix(tk.Label, "08:00:00.") {
			t.Errorf("label %q under a second", tk.Label)
		}
	}
}
