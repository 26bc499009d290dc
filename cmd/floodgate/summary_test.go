package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// simulateGolden compares got with the file testdata/name, which go test -update
// rewrites.
func simulateGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("got:\n%s\nwant (%s):\n%s", got, path, want)
	}
}

// TestSimulateSummaryGolden checks --summary on the two example traces
// against testdata/*.summary (rewrite them with go test -update).
func TestSimulateSummaryGolden(t *testing.T) {
	examples := filepath.Join("..", "..", "examples", "traces")
	tests := []struct {
		golden, stderr string
		args           []string
	}{
		{"burst.summary", "", []string{"--policy", "token-bucket 1/1s burst=3", "--summary", filepath.Join(examples, "burst.trace")}},
		{"api.summary", "floodgate simulate: 13 requests were stamped earlier than a request logged before them, and taken at the latest time seen (3s later at most)\n",
			[]string{"--input-format", "combined", "--policy", "token-bucket 100/1m burst=20", "--summary", filepath.Join(examples, "api.log")}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			code, stdout, stderr := simulateRun(append([]string{"simulate"}, tt.args...), "")
			if code != 0 || stderr != tt.stderr {
				t.Fatalf("exit %d, stderr:\n%s\nwant stderr:\n%s", code, stderr, tt.stderr)
			}
			simulateGolden(t, tt.golden, stdout)
		})
	}
}

// TestSimulateSummary checks the table's rules on a trace made for them:
// the order (refused, then events, most first, then key), quoted keys, a
// cost above the burst (refused, retry never), a peek (admitted, no units)
// and the TOTAL line.
func TestSimulateSummary(t *testing.T) {
	const in = `0 b
0 a
0 "TOTAL"
{"t": 0, "key": "TOTAL"}
{"t": 0, "key": ""}
{"t": 0, "key": "two words"}
0.5 a 0
1 c 5
1 c 2
1 a 2
1 a
1 b 2
1.5 b
1.75 d
1.75 d
1.75 d
2 f
2 f
2 f
2 f
2 e
2 e 3
`
	const want = `KEY          EVENTS  ADMITTED  REFUSED  UNITS_ADMITTED  UNITS_REFUSED  FIRST_REFUSAL  LONGEST_RETRY
f            4       2         2        2               2              2              1s
a            4       3         1        3               1              1              1s
b            3       2         1        3               1              1.5            0.5s
d            3       2         1        2               1              1.75           1s
c            2       1         1        2               5              1              never
e            2       1         1        1               3              2              never
""           1       1         0        1               0              -              -
"\"TOTAL\""  1       1         0        1               0              -              -
"TOTAL"      1       1         0        1               0              -              -
"two words"  1       1         0        1               0              -              -
TOTAL        22      15        7        17              13             1              never
`
	code, stdout, stderr := simulateRun([]string{"simulate", "--policy", "token-bucket 1/1s burst=2", "--summary"}, in)
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant:\n%s", code, stdout, stderr, want)
	}
}

// TestSimulateUsageSummaryExample runs the --summary example of the usage
// text and checks that it prints what the usage says.
func TestSimulateUsageSummaryExample(t *testing.T) {
	_, example, ok := strings.Cut(simulateUsage, "\n  $ floodgate simulate --policy '")
	if !ok {
		t.Fatal("no --summary example in the usage")
	}
	policy, rest, _ := strings.Cut(example, "' --summary ")
	file, rest, _ := strings.Cut(rest, "\n")
	shown, _, _ := strings.Cut(rest, "\n\n")
	want := strings.ReplaceAll("\n"+shown, "\n  ", "\n")[1:] + "\n"
	code, stdout, stderr := simulateRun([]string{"simulate", "--policy", policy, "--summary", filepath.Join("..", "..", file)}, "")
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant (from the usage):\n%s", code, stdout, stderr, want)
	}
}

func TestSummaryKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"alice", "alice"},
		{"2001:db8::1", "2001:db8::1"},
		{"/a?b=c&d", "/a?b=c&d"},
		{"héllo", "héllo"},
		{"", `""`},
		{"TOTAL", `"TOTAL"`},
		{`"TOTAL"`, `"\"TOTAL\""`},
		{`a"b`, `a"b`},
		{"KEY", `"KEY"`},
		{"total", "total"},
		{"a b", `"a b"`},
		{"a\tb", `"a\tb"`},
		{"a\nb", `"a\nb"`},
		{"\xff", `"\xff"`},
		{"\u00a0", `"\u00a0"`},
	}
	for _, tt := range tests {
		if got := summaryKey(tt.in); got != tt.want {
			t.Errorf("summaryKey(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestWithCommas(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", -1000: "-1,000", 123456: "123,456", 1234567: "1,234,567", -100: "-100"} {
		if got := withCommas(n); got != want {
			t.Errorf("withCommas(%d) = %q, want %q", n, got, want)
		}
	}
}

// --top N lists the first N keys of the full summary, in its order, then
// an OTHERS line holding exactly the rest, then the same TOTAL.
func TestSimulateSummaryTop(t *testing.T) {
	var trace strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&trace, "%d.%03d k%d\n", i/1000, i%1000, (i*7919)%257) // 257 keys, uneven
	}
	policy := []string{"simulate", "--policy", "sliding-log 5/1s", "--summary"}
	code, all, stderr := simulateRun(policy, trace.String())
	if code != 0 {
		t.Fatalf("full summary: exit %d: %s", code, stderr)
	}
	allLines := strings.Split(strings.TrimSuffix(all, "\n"), "\n")
	for _, top := range []int{1, 3, 40, 256, 257, 1000} {
		code, got, stderr := simulateRun(append(policy, "--top", strconv.Itoa(top)), trace.String())
		if code != 0 {
			t.Fatalf("--top %d: exit %d: %s", top, code, stderr)
		}
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		shown := min(top, 257)
		fields := func(l string) []string { return strings.Fields(l) }
		for i := 1; i <= shown; i++ {
			if !slices.Equal(fields(lines[i]), fields(allLines[i])) {
				t.Fatalf("--top %d, line %d: %q, want the full summary's %q", top, i, lines[i], allLines[i])
			}
		}
		if last := fields(lines[len(lines)-1]); !slices.Equal(last, fields(allLines[len(allLines)-1])) {
			t.Fatalf("--top %d: TOTAL %q, want %q", top, last, allLines[len(allLines)-1])
		}
		if shown == 257 {
			if len(lines) != len(allLines) {
				t.Fatalf("--top %d of 257 keys: %d lines, want the full %d", top, len(lines), len(allLines))
			}
			continue
		}
		others := fields(lines[shown+1])
		for col := 1; col <= 5; col++ {
			var sum int64
			for _, l := range allLines[shown+1 : len(allLines)-1] {
				n, _ := strconv.ParseInt(fields(l)[col], 10, 64)
				sum += n
			}
			if others[0] != "OTHERS" || others[col] != strconv.FormatInt(sum, 10) {
				t.Fatalf("--top %d: %q, want OTHERS with column %d the sum of the keys not shown, %d", top, lines[shown+1], col, sum)
			}
		}
	}
	if code, _, stderr := simulateRun(append(policy[:3:3], "--top", "3"), trace.String()); code != exitUsage || !strings.Contains(stderr, "--top is for --summary") {
		t.Errorf("--top without --summary: exit %d %s", code, stderr)
	}
}
