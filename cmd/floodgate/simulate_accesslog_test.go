package main

import (
	"strings"
	"testing"
)

// accessLog is a combined log of four requests, the third stamped 2 s
// before the second, which was logged before it.
const accessLog = `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif?x=1 HTTP/1.0" 200 2326 "-" "curl/8.5.0"
2001:db8::1 - - [10/Oct/2000:13:55:38.5 -0700] "GET /b HTTP/1.1" 200 51 "-" "Mozilla \"5.0\""

127.0.0.1 - frank [10/Oct/2000:13:55:36.5 -0700] "POST /upload HTTP/1.0" 201 0 "http://example.com/" "curl/8.5.0"
127.0.0.1 - - [10/Oct/2000:22:55:39 +0200] "GET /a.gif HTTP/1.0" 304 - "-" "curl/8.5.0"
`

func TestSimulateAccessLog(t *testing.T) {
	const moved = "floodgate simulate: 1 request was stamped earlier than a request logged before it, and taken at the latest time seen (2s later)\n"
	tests := []struct {
		name   string
		args   []string
		in     string
		stdout string
		stderr string
	}{
		{"combined, by host", []string{"--input-format", "combined"}, accessLog,
			`{"t":971211336,"key":"127.0.0.1","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211338.5,"key":"2001:db8::1","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211338.5,"key":"127.0.0.1","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}
{"t":971211339,"key":"127.0.0.1","n":1,"allowed":false,"remaining":0,"retry_after":7,"reset_after":9.5}
`, moved},
		{"clf reads combined lines", []string{"--input-format", "clf", "--key", "host"}, accessLog,
			`{"t":971211336,"key":"127.0.0.1","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211338.5,"key":"2001:db8::1","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211338.5,"key":"127.0.0.1","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}
{"t":971211339,"key":"127.0.0.1","n":1,"allowed":false,"remaining":0,"retry_after":7,"reset_after":9.5}
`, moved},
		{"by user", []string{"--input-format", "combined", "--key", "user"}, accessLog,
			`{"t":971211336,"key":"frank","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211338.5,"key":"-","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211338.5,"key":"frank","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}
{"t":971211339,"key":"-","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}
`, moved},
		{"by request", []string{"--input-format", "combined", "--key=request"}, accessLog,
			`{"t":971211336,"key":"GET /a.gif?x=1 HTTP/1.0","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211338.5,"key":"GET /b HTTP/1.1","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211338.5,"key":"POST /upload HTTP/1.0","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211339,"key":"GET /a.gif HTTP/1.0","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
`, moved},
		{"by path", []string{"--input-format", "combined", "--key", "path"}, accessLog,
			`{"t":971211336,"key":"/a.gif","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211338.5,"key":"/b","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211338.5,"key":"/upload","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211339,"key":"/a.gif","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}
`, moved},
		{"summary with UTC times", []string{"--input-format", "combined", "--summary"}, accessLog,
			`KEY          EVENTS  ADMITTED  REFUSED  UNITS_ADMITTED  UNITS_REFUSED  FIRST_REFUSAL         LONGEST_RETRY
127.0.0.1    3       2         1        2               1              2000-10-10T20:55:39Z  7s
2001:db8::1  1       1         0        1               0              -                     -
TOTAL        4       3         1        3               1              2000-10-10T20:55:39Z  7s
`, moved},
		{"in order: no note", []string{"--input-format", "clf"},
			"10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 1\r\n10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1\" 200 1\r\n",
			`{"t":971211336,"key":"10.0.0.1","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
{"t":971211336,"key":"10.0.0.1","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}
`, ""},
		{"many moved", []string{"--input-format", "clf", "-q"},
			`h - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 1
h - - [10/Oct/2000:13:55:35 -0700] "GET / HTTP/1.1" 200 1
h - - [10/Oct/2000:13:55:36.25 -0700] "GET / HTTP/1.1" 200 1
h - - [10/Oct/2000:13:55:34.5 -0700] "GET / HTTP/1.1" 200 1
`, "", "floodgate simulate: 2 requests were stamped earlier than a request logged before them, and taken at the latest time seen (1.75s later at most)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"simulate", "--policy", "sliding-log 2/10s"}, tt.args...)
			code, stdout, stderr := simulateRun(args, tt.in)
			if code != 0 || stdout != tt.stdout || stderr != tt.stderr {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant stdout:\n%s\nstderr:\n%s", code, stdout, stderr, tt.stdout, tt.stderr)
			}
		})
	}
}

func TestSimulateAccessLogErrors(t *testing.T) {
	const good = `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 1` + "\n"
	const first = `{"t":971211336,"key":"10.0.0.1","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}` + "\n"
	tests := []struct {
		name   string
		format string
		in     string
		stdout string
		stderr string
	}{
		{"a native trace", "clf", "0 alice\n", "",
			`floodgate simulate: line 1: malformed line: no [TIME] after the ident (want HOST IDENT USER [TIME] "REQUEST" STATUS SIZE)` + "\n"},
		{"CLF as combined", "combined", "\n" + good, "",
			`floodgate simulate: line 2: malformed line: no "referer" at the end of the line (want HOST IDENT USER [TIME] "REQUEST" STATUS SIZE "REFERER" "USER-AGENT")` + "\n"},
		{"bad month after a good line", "clf", good + `10.0.0.1 - - [10/Okt/2000:13:55:37 -0700] "GET / HTTP/1.1" 200 1` + "\n", first,
			`floodgate simulate: line 2: malformed line: time "10/Okt/2000:13:55:37 -0700" is not DD/Mon/YYYY:HH:MM:SS ±HHMM, such as 10/Oct/2000:13:55:36 -0700` + "\n"},
		{"no such day", "clf", good + `10.0.0.1 - - [31/Sep/2000:13:55:37 -0700] "GET / HTTP/1.1" 200 1` + "\n", first,
			`floodgate simulate: line 2: out of range: time "31/Sep/2000:13:55:37 -0700": no such day` + "\n"},
		{"unterminated request", "clf", `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1 200 1`, "",
			`floodgate simulate: line 1: malformed line: the quoted request has no closing quote (want HOST IDENT USER [TIME] "REQUEST" STATUS SIZE)` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := simulateRun([]string{"simulate", "--policy", "sliding-log 2/10s", "--input-format", tt.format}, tt.in)
			if code != exitUsage || stdout != tt.stdout || stderr != tt.stderr {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr, exitUsage, tt.stdout, tt.stderr)
			}
		})
	}
}

// TestSimulateFlagErrors checks the usage errors of simulate's flags for
// pictures, summaries and access logs.
func TestSimulateFlagErrors(t *testing.T) {
	const hint = "\nRun 'floodgate simulate -h' for usage.\n"
	tests := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"--plot with an unknown extension", []string{"--plot", "run.gif"}, `--plot "run.gif": unknown picture format ".gif" (want a .svg or .png file)`},
		{"--plot without an extension", []string{"--plot", "run"}, `--plot "run": no extension (want a .svg or .png file)`},
		{"--plot empty", []string{"--plot="}, `--plot "": no extension (want a .svg or .png file)`},
		{"--plot without a value", []string{"--plot"}, "--plot needs a value"},
		{"--plot-keys 0", []string{"--plot", "a.svg", "--plot-keys", "0"}, "--plot-keys 0: want 1 to 50"},
		{"--plot-keys -1", []string{"--plot", "a.svg", "--plot-keys=-1"}, "--plot-keys -1: want 1 to 50"},
		{"--plot-keys 51", []string{"--plot", "a.svg", "--plot-keys", "51"}, "--plot-keys 51: want 1 to 50"},
		{"--plot-keys not a number", []string{"--plot", "a.svg", "--plot-keys", "four"}, `--plot-keys: "four" is not a whole number`},
		{"--plot-keys without --plot", []string{"--plot-keys", "3"}, "--plot-keys is for --plot"},
		{"--input-format unknown", []string{"--input-format", "json"}, `--input-format "json": unknown format (want native, clf or combined)`},
		{"--input-format in capitals", []string{"--input-format", "CLF"}, `--input-format "CLF": unknown format (want native, clf or combined)`},
		{"--key with the native format", []string{"--key", "host"}, "--key is for --input-format clf and combined (a native trace names its keys)"},
		{"--key unknown", []string{"--input-format", "clf", "--key", "ip"}, `--key "ip": unknown field (want host, user, request or path)`},
		{"--summary with a value", []string{"--summary=maybe"}, `--summary: "maybe" is not true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"simulate", "--policy", "sliding-log 1/1s"}, tt.args...)
			code, stdout, stderr := simulateRun(args, "0 a\n")
			if want := "floodgate simulate: " + tt.stderr + hint; code != exitUsage || stdout != "" || stderr != want {
				t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit %d, stderr:\n%s", code, stdout, stderr, exitUsage, want)
			}
		})
	}
}

// TestSimulateUsageDocumentsFlags checks that the usage text names every
// flag simulate takes.
func TestSimulateUsageDocumentsFlags(t *testing.T) {
	for _, flag := range []string{"--policy POLICY", "--store URL", "file:PATH", "--input-format F", "--key FIELD", "--summary", "--plot PICTURE", "--plot-keys N", "-q, --quiet"} {
		if !strings.Contains(simulateUsage, flag) {
			t.Errorf("the usage does not mention %s", flag)
		}
	}
}
