package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/seconds"
	"github.com/floodgate/floodgate/memstore"
)

// chanWriter sends each write to a channel, for a test to follow a
// filter's output as it happens.
type chanWriter chan string

func (w chanWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// A recorded log storm replayed on a fake clock, line by line, each line
// arriving at its recorded time: filter passes and refuses exactly as the
// golden file says, writing each passed line before the next arrives.
func TestFilterRecordedStorm(t *testing.T) {
	start := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	fake := clock.NewFake(start)
	defer func(c clock.Clock) { wallClock = c }(wallClock)
	wallClock = fake

	data, err := os.ReadFile("testdata/filter.log")
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	out, refused := make(chanWriter, 1), make(chanWriter, 1)
	var stderr bytes.Buffer
	code := make(chan int, 1)
	lf := func() int {
		args := []string{"--policy", "sliding-log 3/1m", "--key-field", "5", "--global", "token-bucket 4/1s burst=5"}
		return runFilterTo(args, inR, out, refused, &stderr)
	}
	go func() { code <- lf() }()

	var got strings.Builder
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "#") {
			continue
		}
		at, text, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("testdata/filter.log: no tab in %q", line)
		}
		ns, err := seconds.Parse(at)
		if err != nil {
			t.Fatal(err)
		}
		fake.Set(start.Add(time.Duration(ns)))
		if _, err := io.WriteString(inW, text); err != nil {
			t.Fatal(err)
		}
		// Each line comes out at once, passed or refused, before the next
		// goes in.
		select {
		case s := <-out:
			got.WriteString("pass    " + s)
		case s := <-refused:
			got.WriteString("refuse  " + strings.TrimPrefix(s, "floodgate filter: refused, "))
		case <-time.After(10 * time.Second):
			t.Fatalf("no output for %q", text)
		}
	}
	inW.Close()
	if c := <-code; c != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", c, &stderr)
	}
	got.WriteString("--- summary\n" + stderr.String())
	golden(t, "testdata/filter.golden", got.String())
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got:\n%s\nwant (%s):\n%s", got, path, want)
	}
}

// The seed's floodtest.pl: a line repeated is passed twice in ten seconds,
// lines differ in their keys, the line endings are kept, and the refused
// lines go to --refused FILE.
func TestFilterCommand(t *testing.T) {
	refusedPath := filepath.Join(t.TempDir(), "refused.log")
	in := "hello\r\nhello\nhello\nworld\nhello\nlast line without an ending"
	var stdout, stderr bytes.Buffer
	code := run([]string{"filter", "--policy", "sliding-log 2/10s", "--refused", refusedPath, "--top", "1"},
		strings.NewReader(in), &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	if want := "hello\r\nhello\nworld\nlast line without an ending"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", &stdout, want)
	}
	refused, _ := os.ReadFile(refusedPath)
	if n := strings.Count(string(refused), `(key "hello", sliding-log 2/10s): hello`+"\n"); n != 2 {
		t.Errorf("refused file:\n%s\nwant 2 refusals of hello", refused)
	}
	wantSummary := "floodgate filter: 6 lines read, 4 passed, 2 refused\n" +
		"   refused  key (by the per-key limit)\n         2  \"hello\"\n"
	if stderr.String() != wantSummary {
		t.Errorf("stderr:\n%s\nwant:\n%s", &stderr, wantSummary)
	}
}

func TestFilterKeys(t *testing.T) {
	for _, tt := range []struct {
		line string
		n    int
		want string
	}{
		{"a b\tc", 1, "a"}, {"a b\tc", 3, "c"}, {"  a   b ", 2, "b"}, {"a b", 3, ""}, {"", 1, ""},
	} {
		if got := field(tt.line, tt.n); got != tt.want {
			t.Errorf("field(%q, %d) = %q, want %q", tt.line, tt.n, got, tt.want)
		}
	}
	key := regexKey(mustRegexp(t, `from (\S+)`))
	whole := regexKey(mustRegexp(t, `\d+\.\d+`))
	optional := regexKey(mustRegexp(t, `x(y)?`))
	for _, tt := range []struct {
		f          func(string) string
		line, want string
	}{
		{key, "Failed password from 203.0.113.9 port 22", "203.0.113.9"},
		{key, "no address", ""},
		{whole, "took 1.25 s", "1.25"},
		{optional, "x", ""},
		{optional, "xy", "y"},
	} {
		if got := tt.f(tt.line); got != tt.want {
			t.Errorf("key of %q = %q, want %q", tt.line, got, tt.want)
		}
	}
}

func TestFilterUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "--policy POLICY or --global POLICY is required"},
		{[]string{"--policy", "nope 1/1s"}, `--policy: invalid policy "nope 1/1s"`},
		{[]string{"--policy", "sliding-log 1/1s", "file"}, `unexpected argument "file"`},
		{[]string{"--policy", "sliding-log 1/1s", "--key-field", "1", "--key-regex", "x"}, "not both"},
		{[]string{"--policy", "sliding-log 1/1s", "--key-field", "-1"}, "fields count from 1"},
		{[]string{"--policy", "sliding-log 1/1s", "--key-field", "0"}, "--key-field 0: fields count from 1"},
		{[]string{"--policy", "sliding-log 1/1s", "--key-regex", "("}, "--key-regex: error parsing regexp"},
		{[]string{"--global", "sliding-log 1/1s", "--key-field", "2"}, "there is none"},
		{[]string{"--policy", "sliding-log 1/1s", "--top", "-1"}, "--top -1"},
		{[]string{"--policy", "sliding-log 1/1s", "--max-delay", "-1s"}, "--max-delay -1s: a delay cannot be negative"},
		{[]string{"--policy", "sliding-log 1/1s", "--max-delay", "5"}, `--max-delay: "5" is not a duration; write it with a unit, e.g. 5ms or 5s`},
		{[]string{"--policy", "sliding-log 1/1s", "--store", "mongodb://x"}, "--store:"},
		{[]string{"--policy", "sliding-log 1/1s", "--refused", "/nonexistent/dir/f"}, "--refused:"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"filter"}, tt.args...), strings.NewReader("x\n"), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tt.want) || stdout.Len() > 0 {
			t.Errorf("filter %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, &stdout, &stderr, tt.want)
		}
	}
}

// A broken reader and a broken writer end filter with exit 1 and a
// message, after the summary.
func TestFilterIOErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"filter", "--global", "sliding-log 5/1s"}, io.MultiReader(strings.NewReader("a\n"), errReader{}), &stdout, &stderr)
	if code != exitFailure || stdout.String() != "a\n" || !strings.Contains(stderr.String(), "reading: disk on fire") {
		t.Errorf("read error: exit %d, stdout %q, stderr %q", code, &stdout, &stderr)
	}
	stderr.Reset()
	code = run([]string{"filter", "--global", "sliding-log 5/1s"}, strings.NewReader("a\n"), errWriter{}, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "writing: disk on fire") {
		t.Errorf("write error: exit %d, stderr %q", code, &stderr)
	}
}

// An interrupt (a cancelled context) ends a filter that waits for input.
func TestFilterInterrupted(t *testing.T) {
	inR, inW := io.Pipe()
	defer inW.Close()
	lf := &lineFilter{key: func(s string) string { return s }, refusedBy: map[string]int64{}}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- lf.run(ctx, inR, io.Discard, io.Discard) }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("run after cancel: %v", err)
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errors.New("disk on fire") }

func mustRegexp(t *testing.T, expr string) *regexp.Regexp {
	t.Helper()
	re, err := regexp.Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// --max-delay paces on the clock: a line over the global rate is held
// exactly until the limits admit it, written in order, the lines before it
// written out first; a line that would wait past the maximum is refused
// at once and counted.
func TestFilterPace(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	defer func(c clock.Clock) { wallClock = c }(wallClock)
	wallClock = fake
	inR, inW := io.Pipe()
	out, refused := make(chanWriter, 1), make(chanWriter, 1)
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		args := []string{"--policy", "sliding-log 2/10s", "--key-field", "1", "--global", "token-bucket 1/1s", "--max-delay", "3s"}
		code <- runFilterTo(args, inR, out, refused, &stderr)
	}()
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(ch chanWriter, want string) {
		t.Helper()
		select {
		case got := <-ch:
			if got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("nothing written; want %q", want)
		}
	}
	held := func(d time.Duration) {
		t.Helper()
		fake.WaitTimers(1)
		select {
		case s := <-out:
			t.Fatalf("%q written before its delay", s)
		default:
		}
		fake.Advance(d)
	}
	send("k1 a")
	expect(out, "k1 a\n")
	send("k1 b") // the global bucket is empty for 1s
	held(time.Second)
	expect(out, "k1 b\n")
	send("k1 c") // k1's log is full for 10s: past the 3s, refused at once
	expect(refused, `floodgate filter: refused, next in 9s (key "k1", sliding-log 2/10s): k1 c`+"\n")
	send("k2 d")
	held(time.Second)
	expect(out, "k2 d\n")
	inW.Close()
	if c := <-code; c != exitOK {
		t.Fatalf("exit %d: %s", c, &stderr)
	}
	want := "floodgate filter: 4 lines read, 3 passed (2 delayed), 1 refused\n" +
		"   refused  key (by the per-key limit)\n         1  \"k1\"\n"
	if stderr.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", &stderr, want)
	}
}

// An interrupt ends a line's delay at once.
func TestFilterPaceInterrupted(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	defer func(c clock.Clock) { wallClock = c }(wallClock)
	wallClock = fake
	o, err := parseFilterArgs([]string{"--global", "token-bucket 1/1h", "--max-delay", "2h"})
	if err != nil {
		t.Fatal(err)
	}
	lf, err := o.newLineFilter(memstore.New(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- lf.run(ctx, strings.NewReader("a\nb\n"), io.Discard, io.Discard) }()
	fake.WaitTimers(1) // b waits its hour
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("run after cancel: %v", err)
	}
}

// A real-time smoke test: twelve lines at once through a global 40 a
// second and a per-key log, with --max-delay 2s: the eleven distinct keys
// pass in their order, held to the rate (so in no less than 10/40 s, the
// bucket's exact bound), and the repeated key is refused. How many were
// delayed depends on the machine's speed, and is not asserted.
func TestFilterPaceRealTime(t *testing.T) {
	var in strings.Builder
	var want []string
	for i := range 11 {
		fmt.Fprintf(&in, "k%d line\n", i)
		want = append(want, fmt.Sprintf("k%d line", i))
		if i == 5 {
			in.WriteString("k5 again\n")
		}
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run([]string{"filter", "--global", "token-bucket 40/1s burst=1", "--policy", "sliding-log 1/1m", "--key-field", "1", "--max-delay", "2s"},
		strings.NewReader(in.String()), &stdout, &stderr)
	elapsed := time.Since(start)
	t.Logf("12 lines paced at 40/s in %v", elapsed)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	if got := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n"); !slices.Equal(got, want) {
		t.Errorf("passed:\n%q\nwant:\n%q", got, want)
	}
	if !strings.Contains(stderr.String(), `refused, next in`) || !regexp.MustCompile(`12 lines read, 11 passed \(\d+ delayed\), 1 refused`).MatchString(stderr.String()) {
		t.Errorf("stderr:\n%s", &stderr)
	}
	if elapsed < 250*time.Millisecond {
		t.Errorf("11 lines at 40/s in %v: not paced", elapsed)
	}
}
