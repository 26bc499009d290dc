package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// simulateRun runs floodgate with args and stdin, and returns the exit
// code, stdout and stderr.
func simulateRun(args []string, stdin string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestSimulate(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		in     string
		want   string
	}{
		{"text", "token-bucket 5/1s", "12.345 alice 1\n12.5 alice\n",
			`{"t":12.345,"key":"alice","n":1,"allowed":true,"remaining":4,"retry_after":0,"reset_after":0.2}
{"t":12.5,"key":"alice","n":1,"allowed":true,"remaining":3,"retry_after":0,"reset_after":0.245}
`},
		{"JSON", "token-bucket 5/1s", `{"t": 12.345, "key": "alice", "n": 1}` + "\n" + `{"t": 1.25e1, "key": "alice", "n": 2, "extra": [1]}`,
			`{"t":12.345,"key":"alice","n":1,"allowed":true,"remaining":4,"retry_after":0,"reset_after":0.2}
{"t":12.5,"key":"alice","n":2,"allowed":true,"remaining":2,"retry_after":0,"reset_after":0.445}
`},
		{"comments, blank lines, default key and n", "fixed-window 2/10", "# header\n\n  \n1\n  # indented comment\n{\"t\":2}\n3 \"\"\n",
			`{"t":1,"key":"","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":9}
{"t":2,"key":"","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":8}
{"t":3,"key":"\"\"","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":7}
`},
		{"n = 0 peeks without taking", "sliding-log 1/10", "0 a 0\n1 a\n2 a 0\n3 a\n",
			`{"t":0,"key":"a","n":0,"allowed":true,"remaining":1,"retry_after":0,"reset_after":0}
{"t":1,"key":"a","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}
{"t":2,"key":"a","n":0,"allowed":true,"remaining":0,"retry_after":0,"reset_after":9}
{"t":3,"key":"a","n":1,"allowed":false,"remaining":0,"retry_after":8,"reset_after":8}
`},
		{"a cost above the burst is never admitted", "token-bucket 1/1s burst=3", "0 a 4\n0 a 3\n0.5 a 4\n",
			`{"t":0,"key":"a","n":4,"allowed":false,"remaining":3,"retry_after":-1,"reset_after":0}
{"t":0,"key":"a","n":3,"allowed":true,"remaining":0,"retry_after":0,"reset_after":3}
{"t":0.5,"key":"a","n":4,"allowed":false,"remaining":0,"retry_after":-1,"reset_after":2.5}
`},
		{"nanosecond times", "fixed-window 1/1s", "0.000000001\n0.0000000020 b\n2.0000000000 c\n",
			`{"t":0.000000001,"key":"","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":0.999999999}
{"t":0.000000002,"key":"b","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":0.999999998}
{"t":2,"key":"c","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":1}
`},
		{"keys are escaped and keep their own state", "fixed-window 1/1m",
			`{"t":0,"key":"say \"hi\"\\now"}` + "\n" +
				`{"t":0,"key":"line\nbreak\ttab\u0001<&>"}` + "\n" +
				`{"t":0,"key":"héllo 😀"}` + "\n" +
				"0 \xff\n0 \xfe\n0 \xff\n",
			`{"t":0,"key":"say \"hi\"\\now","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":60}
{"t":0,"key":"line\nbreak\ttab\u0001<&>","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":60}
{"t":0,"key":"héllo 😀","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":60}
{"t":0,"key":"\ufffd","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":60}
{"t":0,"key":"\ufffd","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":60}
{"t":0,"key":"\ufffd","n":1,"allowed":false,"remaining":0,"retry_after":60,"reset_after":60}
`},
		{"empty trace", "sliding-log 1/1s", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"simulate", "--policy", tt.policy},
				{"simulate", "-policy=" + tt.policy, "-"},
			} {
				code, stdout, stderr := simulateRun(args, tt.in)
				if code != 0 || stdout != tt.want || stderr != "" {
					t.Errorf("%q: exit %d\nstdout:\n%s\nstderr:\n%s\nwant stdout:\n%s", args, code, stdout, stderr, tt.want)
				}
				for _, line := range strings.SplitAfter(stdout, "\n") {
					if line != "" && !json.Valid([]byte(line)) {
						t.Errorf("invalid JSON line %q", line)
					}
				}
			}
		})
	}
}

func TestSimulateErrors(t *testing.T) {
	const hint = "Run 'floodgate simulate -h' for usage.\n"
	tests := []struct {
		name   string
		args   []string
		in     string
		code   int
		stdout string
		stderr string
	}{
		{"no policy", []string{}, "", exitUsage, "",
			"floodgate simulate: --policy is required, such as --policy 'token-bucket 5/1s'\n" + hint},
		{"empty policy", []string{"--policy", ""}, "", exitUsage, "",
			"floodgate simulate: --policy is required, such as --policy 'token-bucket 5/1s'\n" + hint},
		{"policy without a value", []string{"--policy"}, "", exitUsage, "",
			"floodgate simulate: --policy needs a value\n" + hint},
		{"bad policy", []string{"--policy", "token-bucket 5/1d"}, "", exitUsage, "",
			`floodgate simulate: invalid policy "token-bucket 5/1d": period "1d" is not a Go duration (the largest unit is h: 1d is 24h)` + "\n" + hint},
		{"unknown algorithm", []string{"--policy", "bucket 5/1s"}, "", exitUsage, "",
			`floodgate simulate: invalid policy "bucket 5/1s": unknown algorithm "bucket" (want token-bucket, leaky-bucket, sliding-log, sliding-window or fixed-window)` + "\n" + hint},
		{"unknown flag", []string{"--policy", "sliding-log 1/1s", "--rate", "5"}, "", exitUsage, "",
			"floodgate simulate: unknown flag --rate\n" + hint},
		{"extra arguments", []string{"--policy", "sliding-log 1/1s", "a.trace", "b.trace"}, "", exitUsage, "",
			`floodgate simulate: too many arguments: ["b.trace"] (want at most one FILE)` + "\n" + hint},
		{"flag after FILE", []string{"a.trace", "--policy", "sliding-log 1/1s"}, "", exitUsage, "",
			`floodgate simulate: too many arguments: ["--policy" "sliding-log 1/1s"] (flags go before FILE)` + "\n" + hint},
		{"flag after FILE, with a policy", []string{"--policy", "sliding-log 1/1s", "a.trace", "-x"}, "", exitUsage, "",
			`floodgate simulate: too many arguments: ["-x"] (flags go before FILE)` + "\n" + hint},
		{"missing FILE", []string{"--policy", "sliding-log 1/1s", "testdata/missing.trace"}, "", exitUsage, "",
			"floodgate simulate: open testdata/missing.trace: no such file or directory\n"},
		{"unreadable FILE", []string{"--policy", "sliding-log 1/1s", "testdata"}, "", exitUsage, "",
			"floodgate simulate: read testdata: is a directory\n"},
		{"malformed line after good ones", []string{"--policy", "sliding-log 1/1s"}, "# c\n0 a\n\n1 a\n1.5 a b c\n2 a\n", exitUsage,
			`{"t":0,"key":"a","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":1}
{"t":1,"key":"a","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":1}
`,
			`floodgate simulate: line 5: malformed line: 4 fields, want T [KEY [N]] (write a key with spaces in JSON: {"t": 1, "key": "a b"})` + "\n"},
		{"bad JSON", []string{"--policy", "sliding-log 1/1s"}, "0 a\n{\"t\": 1, \"key\": alice}\n", exitUsage,
			`{"t":0,"key":"a","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":1}` + "\n",
			"floodgate simulate: line 2: malformed line: invalid JSON: invalid character 'a' looking for beginning of value\n"},
		{"bad time", []string{"--policy", "sliding-log 1/1s"}, "1e10 a\n", exitUsage, "",
			`floodgate simulate: line 1: t "1e10": out of range (want 0 to 4611686018.427387904 seconds)` + "\n"},
		{"bad cost", []string{"--policy", "sliding-log 1/1s"}, `{"t": 1, "n": 0.5}`, exitUsage, "",
			`floodgate simulate: line 1: n "0.5": invalid number (want a whole number like 1 or 2e0)` + "\n"},
		{"backwards time", []string{"--policy", "sliding-log 1/1s"}, "5 a\n7 b\n6 a\n", exitUsage,
			`{"t":5,"key":"a","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":1}
{"t":7,"key":"b","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":1}
`,
			"floodgate simulate: line 3: time goes backwards: t 6 is before t 7 on line 2 (traces must be in time order)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"simulate"}, tt.args...)
			code, stdout, stderr := simulateRun(args, tt.in)
			if code != tt.code || stdout != tt.stdout || stderr != tt.stderr {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestSimulateFloodControl replays the transcript of "Implementing Flood
// Control" (2004): at most 5 events per 60 s, kept as an exact log.
func TestSimulateFloodControl(t *testing.T) {
	var in strings.Builder
	for _, t := range []string{"0", "3", "8", "10", "13", "17", "34", "56", "67"} {
		in.WriteString(t + " GLOBAL\n")
	}
	code, stdout, stderr := simulateRun([]string{"simulate", "--policy", "sliding-log 5/60"}, in.String())
	const want = `{"t":0,"key":"GLOBAL","n":1,"allowed":true,"remaining":4,"retry_after":0,"reset_after":60}
{"t":3,"key":"GLOBAL","n":1,"allowed":true,"remaining":3,"retry_after":0,"reset_after":60}
{"t":8,"key":"GLOBAL","n":1,"allowed":true,"remaining":2,"retry_after":0,"reset_after":60}
{"t":10,"key":"GLOBAL","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":60}
{"t":13,"key":"GLOBAL","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":60}
{"t":17,"key":"GLOBAL","n":1,"allowed":false,"remaining":0,"retry_after":43,"reset_after":56}
{"t":34,"key":"GLOBAL","n":1,"allowed":false,"remaining":0,"retry_after":26,"reset_after":39}
{"t":56,"key":"GLOBAL","n":1,"allowed":false,"remaining":0,"retry_after":4,"reset_after":17}
{"t":67,"key":"GLOBAL","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":60}
`
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}
}

// TestSimulateBurstTrace replays the README's example trace
// (examples/traces/burst.trace) from a FILE argument
// and compares the decisions with testdata/burst.decisions (rewrite it
// with go test -update).
func TestSimulateBurstTrace(t *testing.T) {
	code, stdout, stderr := simulateRun([]string{"simulate", "--policy", "token-bucket 1/1s burst=3", filepath.Join("..", "..", "examples", "traces", "burst.trace")}, "")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	golden := filepath.Join("testdata", "burst.decisions")
	if *update {
		if err := os.WriteFile(golden, []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if stdout != string(want) {
		t.Errorf("stdout:\n%s\nwant (%s):\n%s", stdout, golden, want)
	}
	// The story the trace's comment tells.
	var alice strings.Builder
	for line := range strings.Lines(stdout) {
		var d struct {
			Key     string
			Allowed bool
		}
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatal(err)
		}
		switch {
		case d.Key == "alice" && d.Allowed:
			alice.WriteByte('+')
		case d.Key == "alice":
			alice.WriteByte('-')
		case !d.Allowed:
			t.Errorf("bob denied: %s", line)
		}
	}
	if got := alice.String(); got != "+++----++-" {
		t.Errorf("alice's decisions: %s, want +++----++-", got)
	}
}

func TestSimulateHelp(t *testing.T) {
	for _, args := range [][]string{{"simulate", "-h"}, {"simulate", "--help"}, {"simulate", "--policy", "x", "-help"}} {
		code, stdout, stderr := simulateRun(args, "")
		if code != 0 || stdout != simulateUsage || stderr != "" {
			t.Errorf("%q: exit %d, stdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
	}
}

// TestSimulateUsageExample runs the example in the usage text and checks
// that it prints what the usage says it prints.
func TestSimulateUsageExample(t *testing.T) {
	_, example, _ := strings.Cut(simulateUsage, "Example:\n  $ printf '")
	in, rest, _ := strings.Cut(example, "' | floodgate simulate --policy '")
	policy, rest, _ := strings.Cut(rest, "'\n")
	shown, _, _ := strings.Cut(rest, "\n\n")
	want := strings.ReplaceAll(shown, "  {", "{") + "\n"
	code, stdout, stderr := simulateRun([]string{"simulate", "--policy", policy}, strings.ReplaceAll(in, `\n`, "\n"))
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant (from the usage):\n%s", code, stdout, stderr, want)
	}
}

// TestSimulateStreams checks that each decision is written as soon as its
// line is read, while the rest of the input has not been written yet.
func TestSimulateStreams(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan int)
	var stderr bytes.Buffer
	go func() {
		code := run([]string{"simulate", "--policy", "sliding-log 1/10"}, inR, outW, &stderr)
		outW.Close()
		done <- code
	}()
	lines := make(chan string)
	go func() {
		r := bufio.NewReader(outR)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
		}
	}()
	next := func() string {
		select {
		case line := <-lines:
			return line
		case <-time.After(10 * time.Second):
			t.Fatal("no output line while the input waits")
			return ""
		}
	}
	for _, step := range []struct{ in, out string }{
		{"0 a\n", `{"t":0,"key":"a","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}` + "\n"},
		{"# a comment, then a line in two writes\n1", ""},
		{" a\n", `{"t":1,"key":"a","n":1,"allowed":false,"remaining":0,"retry_after":9,"reset_after":9}` + "\n"},
	} {
		if _, err := io.WriteString(inW, step.in); err != nil {
			t.Fatal(err)
		}
		if step.out == "" {
			continue
		}
		if got := next(); got != step.out {
			t.Fatalf("after writing %q got %q, want %q", step.in, got, step.out)
		}
	}
	inW.Close()
	if _, ok := <-lines; ok {
		t.Error("more output after the input ended")
	}
	if code := <-done; code != 0 || stderr.Len() > 0 {
		t.Errorf("exit %d, stderr: %s", code, &stderr)
	}
}

// failingWriter accepts n bytes, then fails.
type failingWriter struct{ n int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errors.New("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestSimulateWriteError(t *testing.T) {
	in := strings.Repeat("0 a\n", 10_000) // more than the output buffer holds
	var stderr bytes.Buffer
	code := run([]string{"simulate", "--policy", "sliding-log 1/1s"}, strings.NewReader(in), &failingWriter{n: 100}, &stderr)
	if code != exitFailure || stderr.String() != "floodgate simulate: disk full\n" {
		t.Errorf("exit %d, stderr %q; want exit %d, disk full", code, &stderr, exitFailure)
	}
}

func TestAppendJSONString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `""`},
		{"alice", `"alice"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"\n\r\t\x00\x1f\x7f", `"\n\r\t\u0000\u001f` + "\x7f\""},
		{"<&>", `"<&>"`},
		{"é😀\u2028", "\"é😀\u2028\""},
		{"a\xffb\xe2\x82", `"a\ufffdb\ufffd\ufffd"`},
	}
	for _, tt := range tests {
		if got := string(appendJSONString(nil, tt.in)); got != tt.want {
			t.Errorf("appendJSONString(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzAppendJSONString checks that every string is written as valid JSON
// that decodes to what encoding/json makes of it.
func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"\\\n", "\xff\xfe", "é😀\u2028<&>", "\x00\x1f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := appendJSONString(nil, s)
		var got, want string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("appendJSONString(%q) = %s, invalid JSON: %v", s, out, err)
		}
		std, _ := json.Marshal(s)
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("appendJSONString(%q) = %s, decodes to %q, want %q", s, out, got, want)
		}
	})
}

// BenchmarkSimulate replays 10,000 events over 100 keys; ns/op is per
// trace.
func BenchmarkSimulate(b *testing.B) {
	var in strings.Builder
	for i := range 10_000 {
		fmt.Fprintf(&in, "%d.%03d user%d\n", i/1000, i%1000, i%100)
	}
	p, err := algo.ParsePolicy("token-bucket 10/1s burst=20")
	if err != nil {
		b.Fatal(err)
	}
	tb, done, err := openSimulationStore("memory", p)
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	b.ReportAllocs()
	b.SetBytes(int64(in.Len()))
	for b.Loop() {
		if err := (&simulation{events: io.Discard}).run(tb, strings.NewReader(in.String())); err != nil {
			b.Fatal(err)
		}
	}
}
