package trace

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// The example line of the Common Log Format's documentation, and its time:
// 13:55:36 at -0700 is 20:55:36 UTC.
const (
	clfLine = `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /apache_pb.gif HTTP/1.0" 200 2326`
	clfT    = 971_211_336 * int64(time.Second)
)

func TestAccessLog(t *testing.T) {
	const combinedTail = ` "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"`
	tests := []struct {
		name     string
		combined bool
		key      LogKey
		line     string
		want     Event
	}{
		{"CLF", false, LogHost, clfLine, Event{T: clfT, Key: "127.0.0.1", N: 1}},
		{"combined", true, LogHost, clfLine + combinedTail, Event{T: clfT, Key: "127.0.0.1", N: 1}},
		{"CLF reads a combined line", false, LogHost, clfLine + combinedTail, Event{T: clfT, Key: "127.0.0.1", N: 1}},
		{"fields after the last are ignored", true, LogHost, clfLine + combinedTail + ` 0.042 "upstream"`, Event{T: clfT, Key: "127.0.0.1", N: 1}},
		{"CLF with a field after the size", false, LogHost, clfLine + "\t17", Event{T: clfT, Key: "127.0.0.1", N: 1}},
		{"key user", false, LogUser, clfLine, Event{T: clfT, Key: "frank", N: 1}},
		{"key request", false, LogRequest, clfLine, Event{T: clfT, Key: "GET /apache_pb.gif HTTP/1.0", N: 1}},
		{"key path", false, LogPath, clfLine, Event{T: clfT, Key: "/apache_pb.gif", N: 1}},
		{"key path without the query", false, LogPath,
			`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /search?q=a+b&x=%22 HTTP/1.1" 200 0`, Event{T: clfT, Key: "/search", N: 1}},
		{"key path of a request line without a target", false, LogPath,
			`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "-" 408 -`, Event{T: clfT, Key: "", N: 1}},
		{"key path of HTTP/0.9", false, LogPath,
			`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /old" 200 10`, Event{T: clfT, Key: "/old", N: 1}},
		{"user with a space", false, LogUser,
			`10.0.0.1 - alice smith [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5`, Event{T: clfT, Key: "alice smith", N: 1}},
		{"no user", false, LogUser,
			`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5`, Event{T: clfT, Key: "-", N: 1}},
		{"status and size -", false, LogHost,
			`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" - -`, Event{T: clfT, Key: "10.0.0.1", N: 1}},
		{"IPv6 host", true, LogHost,
			`2001:db8::1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/2.0" 200 5 "-" "curl/8.5.0"`, Event{T: clfT, Key: "2001:db8::1", N: 1}},
		{"IPv6 loopback", false, LogHost, `::1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5`, Event{T: clfT, Key: "::1", N: 1}},
		{"IPv6 host in brackets", false, LogHost,
			`[2001:db8::1] - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5`, Event{T: clfT, Key: "[2001:db8::1]", N: 1}},
		{"host name", false, LogHost, `crawler.example.org - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5`,
			Event{T: clfT, Key: "crawler.example.org", N: 1}},
		{"escaped quotes in the request", false, LogRequest,
			`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a\"b\\c HTTP/1.1" 400 0`, Event{T: clfT, Key: `GET /a"b\c HTTP/1.1`, N: 1}},
		{"hex and control escapes in the request", false, LogRequest,
			`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "\x16\x03\x01\x02\n\t\r\b\v\q\x4" 400 0`, Event{T: clfT, Key: "\x16\x03\x01\x02\n\t\r\b\v\\q\\x4", N: 1}},
		{"nginx escapes in the path", false, LogPath,
			`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a\x22b?c HTTP/1.1" 404 0`, Event{T: clfT, Key: `/a"b`, N: 1}},
		{"escaped quotes in the user-agent", true, LogHost,
			`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5 "-" "Mozilla \"quoted\" [x] \\"`, Event{T: clfT, Key: "10.0.0.1", N: 1}},
		{"empty quoted fields", true, LogRequest,
			`10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "" 400 0 "" ""`, Event{T: clfT, Key: "", N: 1}},
		{"spaces between fields", false, LogUser,
			`10.0.0.1  -  bob  [10/Oct/2000:13:55:36 -0700]  "GET / HTTP/1.1"  200  5`, Event{T: clfT, Key: "bob", N: 1}},
		{"zone +0000", false, LogHost, `h - - [10/Oct/2000:20:55:36 +0000] "GET / HTTP/1.1" 200 5`, Event{T: clfT, Key: "h", N: 1}},
		{"zone -0000", false, LogHost, `h - - [10/Oct/2000:20:55:36 -0000] "GET / HTTP/1.1" 200 5`, Event{T: clfT, Key: "h", N: 1}},
		{"zone +0530", false, LogHost, `h - - [11/Oct/2000:02:25:36 +0530] "GET / HTTP/1.1" 200 5`, Event{T: clfT, Key: "h", N: 1}},
		{"zone +1400, the next day", false, LogHost, `h - - [11/Oct/2000:10:55:36 +1400] "GET / HTTP/1.1" 200 5`, Event{T: clfT, Key: "h", N: 1}},
		{"zone -1200", false, LogHost, `h - - [10/Oct/2000:08:55:36 -1200] "GET / HTTP/1.1" 200 5`, Event{T: clfT, Key: "h", N: 1}},
		{"milliseconds", false, LogHost, `h - - [10/Oct/2000:13:55:36.250 -0700] "GET / HTTP/1.1" 200 5`, Event{T: clfT + 250e6, Key: "h", N: 1}},
		{"nanoseconds", false, LogHost, `h - - [10/Oct/2000:13:55:36.000000001 -0700] "GET / HTTP/1.1" 200 5`, Event{T: clfT + 1, Key: "h", N: 1}},
		{"leap day", false, LogHost, `h - - [29/Feb/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 5`, Event{T: 1_709_164_800e9, Key: "h", N: 1}},
		{"the epoch", false, LogHost, `h - - [01/Jan/1970:01:00:00 +0100] "GET / HTTP/1.1" 200 5`, Event{T: 0, Key: "h", N: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ok, err := AccessLog{Combined: tt.combined, Key: tt.key}.Parse([]byte(tt.line))
			if err != nil || !ok || ev != tt.want {
				t.Errorf("Parse(%q) = %+v, %v, %v; want %+v", tt.line, ev, ok, err, tt.want)
			}
		})
	}
}

func TestAccessLogSkipsBlankLines(t *testing.T) {
	for _, line := range []string{"", " ", "\t \t"} {
		if ev, ok, err := (AccessLog{}).Parse([]byte(line)); ok || err != nil {
			t.Errorf("Parse(%q) = %+v, %v, %v; want a skip", line, ev, ok, err)
		}
	}
}

func TestAccessLogErrors(t *testing.T) {
	const (
		clf      = ` (want HOST IDENT USER [TIME] "REQUEST" STATUS SIZE)`
		combined = ` (want HOST IDENT USER [TIME] "REQUEST" STATUS SIZE "REFERER" "USER-AGENT")`
		timeForm = ` is not DD/Mon/YYYY:HH:MM:SS ±HHMM, such as 10/Oct/2000:13:55:36 -0700`
		req      = `"GET / HTTP/1.1" 200 5`
	)
	tests := []struct {
		name     string
		combined bool
		line     string
		want     error
		msg      string
	}{
		{"a native trace line", false, "12.5 alice 1", ErrSyntax, "malformed line: no [TIME] after the ident" + clf},
		{"only a host", false, "10.0.0.1", ErrSyntax, "malformed line: the line ends after the host" + clf},
		{"a leading tab", false, "\t10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] " + req, ErrSyntax, "malformed line: no host at the start of the line" + clf},
		{"no user", false, "10.0.0.1 - [10/Oct/2000:13:55:36 -0700] " + req, ErrSyntax, "malformed line: no user between the ident and [TIME]" + clf},
		{"no closing bracket", false, "10.0.0.1 - - [10/Oct/2000:13:55:36 -0700 " + req, ErrSyntax, "malformed line: no ] after [TIME" + clf},
		{"no request", false, "10.0.0.1 - - [10/Oct/2000:13:55:36 -0700]", ErrSyntax, `malformed line: no "request" at the end of the line` + clf},
		{"request not quoted", false, "10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] GET / HTTP/1.1 200 5", ErrSyntax,
			`malformed line: "GET / HTTP/1.1 200 5" where the quoted request should be` + clf},
		{"unterminated request", false, `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1 200 5`, ErrSyntax,
			"malformed line: the quoted request has no closing quote" + clf},
		{"escaped closing quote", false, `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /\"`, ErrSyntax,
			"malformed line: the quoted request has no closing quote" + clf},
		{"unescaped quote inside the request", false, `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a"b HTTP/1.1" 200 5`, ErrSyntax,
			`malformed line: "b HTTP/1.1\" 200 5" right after the quoted request` + clf},
		{"no status", false, `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1"`, ErrSyntax, "malformed line: no status after the request" + clf},
		{"no size", false, `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200`, ErrSyntax, "malformed line: no size after the status" + clf},
		{"status not a number", false, `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" OK 5`, ErrSyntax,
			`malformed line: status "OK" is not digits or -` + clf},
		{"size not a number", false, `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5k`, ErrSyntax,
			`malformed line: size "5k" is not digits or -` + clf},
		{"combined without the user-agent", true, `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5 "-"`, ErrSyntax,
			`malformed line: no "user-agent" at the end of the line` + combined},
		{"combined from a CLF line", true, clfLine, ErrSyntax, `malformed line: no "referer" at the end of the line` + combined},
		{"combined with text after the user-agent", true, `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5 "-" "curl"x`, ErrSyntax,
			`malformed line: "x" right after the quoted user-agent` + combined},
		{"no zone", false, "h - - [10/Oct/2000:13:55:36] " + req, ErrSyntax, `malformed line: time "10/Oct/2000:13:55:36"` + timeForm},
		{"zone with a colon", false, "h - - [10/Oct/2000:13:55:36 -07:00] " + req, ErrSyntax, `malformed line: time "10/Oct/2000:13:55:36 -07:00"` + timeForm},
		{"ISO time", false, "h - - [2000-10-10T13:55:36-07:00] " + req, ErrSyntax, `malformed line: time "2000-10-10T13:55:36-07:00"` + timeForm},
		{"month in capitals", false, "h - - [10/OCT/2000:13:55:36 -0700] " + req, ErrSyntax, `malformed line: time "10/OCT/2000:13:55:36 -0700"` + timeForm},
		{"month a number", false, "h - - [10/010/2000:13:55:36 -0700] " + req, ErrSyntax, `malformed line: time "10/010/2000:13:55:36 -0700"` + timeForm},
		{"one-digit day", false, "h - - [1/Oct/2000:13:55:36 -0700] " + req, ErrSyntax, `malformed line: time "1/Oct/2000:13:55:36 -0700"` + timeForm},
		{"empty fraction", false, "h - - [10/Oct/2000:13:55:36. -0700] " + req, ErrSyntax, `malformed line: time "10/Oct/2000:13:55:36. -0700"` + timeForm},
		{"ten decimals", false, "h - - [10/Oct/2000:13:55:36.0123456789 -0700] " + req, ErrSyntax,
			`malformed line: time "10/Oct/2000:13:55:36.0123456789 -0700"` + timeForm},
		{"31 April", false, "h - - [31/Apr/2000:13:55:36 -0700] " + req, ErrRange, `out of range: time "31/Apr/2000:13:55:36 -0700": no such day`},
		{"29 February 1900", false, "h - - [29/Feb/1900:13:55:36 -0700] " + req, ErrRange, `out of range: time "29/Feb/1900:13:55:36 -0700": no such day`},
		{"day 0", false, "h - - [00/Oct/2000:13:55:36 -0700] " + req, ErrRange, `out of range: time "00/Oct/2000:13:55:36 -0700": no such day`},
		{"hour 24", false, "h - - [10/Oct/2000:24:00:00 -0700] " + req, ErrRange, `out of range: time "10/Oct/2000:24:00:00 -0700": no such time of day`},
		{"leap second", false, "h - - [31/Dec/2016:23:59:60 +0000] " + req, ErrRange, `out of range: time "31/Dec/2016:23:59:60 +0000": no such time of day`},
		{"zone +2400", false, "h - - [10/Oct/2000:13:55:36 +2400] " + req, ErrRange, `out of range: time "10/Oct/2000:13:55:36 +2400": no such zone`},
		{"zone -0060", false, "h - - [10/Oct/2000:13:55:36 -0060] " + req, ErrRange, `out of range: time "10/Oct/2000:13:55:36 -0060": no such zone`},
		{"before 1970", false, "h - - [31/Dec/1969:23:59:59 +0000] " + req, ErrRange,
			`out of range: time "31/Dec/1969:23:59:59 +0000": before 1970 or after 2116`},
		{"just before 1970 by its zone", false, "h - - [01/Jan/1970:00:59:59 +0100] " + req, ErrRange,
			`out of range: time "01/Jan/1970:00:59:59 +0100": before 1970 or after 2116`},
		{"after algo.MaxTime", false, "h - - [01/Jan/2117:00:00:00 +0000] " + req, ErrRange,
			`out of range: time "01/Jan/2117:00:00:00 +0000": before 1970 or after 2116`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, ok, err := AccessLog{Combined: tt.combined}.Parse([]byte(tt.line))
			if !errors.Is(err, tt.want) || err.Error() != tt.msg || ok || ev != (Event{}) {
				t.Errorf("Parse(%q) = %+v, %v, %v\nwant the error %s", tt.line, ev, ok, err, tt.msg)
			}
		})
	}
}

// TestAccessLogReader reads a log through a Reader, which numbers the
// lines, and through InOrder, which takes a request stamped before the
// one logged above it at that one's time.
func TestAccessLogReader(t *testing.T) {
	const in = `10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET /a HTTP/1.1" 200 5 "-" "curl"

10.0.0.2 - - [10/Oct/2000:13:55:38 -0700] "GET /b HTTP/1.1" 200 5 "-" "curl"
10.0.0.1 - - [10/Oct/2000:13:55:37 -0700] "POST /c HTTP/1.1" 201 5 "-" "curl"
10.0.0.1 - - [10/Oct/2000:13:55:37.5 -0700] "POST /c HTTP/1.1" 201 5 "-" "curl"
10.0.0.3 - - [10/Oct/2000:13:55:39 -0700] "GET /d HTTP/1.1" 200 5 "-" "curl"
10.0.0.1 - - [10/Oct/2000:13:55:39 -0700] "GET /e HTTP/1.1" 200 5
`
	r := NewReader(strings.NewReader(in))
	order := &InOrder{Format: AccessLog{Combined: true}.Parse}
	r.Format = order.Parse
	var got []Event
	var err error
	for {
		var ev Event
		if ev, err = r.Next(); err != nil {
			break
		}
		got = append(got, ev)
	}
	s := int64(time.Second)
	want := []Event{
		{1, clfT, "10.0.0.1", 1},
		{3, clfT + 2*s, "10.0.0.2", 1},
		{4, clfT + 2*s, "10.0.0.1", 1}, // stamped 1 s earlier
		{5, clfT + 2*s, "10.0.0.1", 1}, // 0.5 s earlier
		{6, clfT + 3*s, "10.0.0.3", 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("events %+v\nwant %+v", got, want)
	}
	if order.Moved != 2 || order.MaxMove != s {
		t.Errorf("Moved %d, MaxMove %d; want 2 and 1s", order.Moved, order.MaxMove)
	}
	const msg = `line 7: malformed line: no "referer" at the end of the line (want HOST IDENT USER [TIME] "REQUEST" STATUS SIZE "REFERER" "USER-AGENT")`
	var le *LineError
	if !errors.As(err, &le) || le.Line != 7 || !errors.Is(err, ErrSyntax) || err.Error() != msg {
		t.Errorf("error %v, want %s", err, msg)
	}
}

func TestInOrder(t *testing.T) {
	o := &InOrder{} // ParseLine
	r := NewReader(strings.NewReader("10 a\n12 b\n11 c\n\n12 d\n9 e\n13 f\n"))
	r.Format = o.Parse
	var got []Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	want := []Event{{1, 10e9, "a", 1}, {2, 12e9, "b", 1}, {3, 12e9, "c", 1}, {5, 12e9, "d", 1}, {6, 12e9, "e", 1}, {7, 13e9, "f", 1}}
	if !slices.Equal(got, want) || o.Moved != 2 || o.MaxMove != 3e9 {
		t.Errorf("events %+v, Moved %d, MaxMove %d\nwant %+v, 2, 3e9", got, o.Moved, o.MaxMove, want)
	}
}

func TestLogKeyString(t *testing.T) {
	for k, want := range map[LogKey]string{LogHost: "host", LogUser: "user", LogRequest: "request", LogPath: "path", 9: "LogKey(9)"} {
		if got := k.String(); got != want {
			t.Errorf("LogKey(%d).String() = %q, want %q", k, got, want)
		}
	}
}

// FuzzAccessLog checks that Parse never panics, returns errors that wrap a
// sentinel and events within the Format's bounds, reads the time exactly
// as time.Parse does, and accepts as CLF every line it accepts as
// Combined, with the same event.
func FuzzAccessLog(f *testing.F) {
	for _, s := range []string{
		clfLine,
		clfLine + ` "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"`,
		`::1 - a b [29/Feb/2024:23:59:59.123456789 +1400] "GET /x?y \"z\" \x41" - - "" "\\" 0.1`,
		`h - - [01/Jan/1970:00:00:00 +0000] "-" 408 -`,
		`h - - [31/Apr/2000:13:55:36 -0700] "GET / HTTP/1.1" 200 5`,
		"h - - [10/Oct/2000:13:55:36 -0700] \"\xff\" 200 5",
	} {
		f.Add(s, uint8(0))
	}
	const layout = "02/Jan/2006:15:04:05 -0700"
	f.Fuzz(func(t *testing.T, line string, key uint8) {
		k := LogKey(key % 4)
		clf, clfOK, clfErr := AccessLog{Key: k}.Parse([]byte(line))
		comb, combOK, combErr := AccessLog{Combined: true, Key: k}.Parse([]byte(line))
		for _, err := range []error{clfErr, combErr} {
			if err != nil && !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrRange) {
				t.Fatalf("Parse(%q): %v wraps no sentinel", line, err)
			}
		}
		if combErr == nil && (clfErr != nil || clf != comb || clfOK != combOK) {
			t.Fatalf("Parse(%q): combined %+v, %v; CLF %+v, %v, %v", line, comb, combOK, clf, clfOK, clfErr)
		}
		if clfErr != nil || !clfOK {
			if clfErr == nil && len(bytes.Trim([]byte(line), " \t")) > 0 {
				t.Fatalf("Parse(%q) skipped a line that is not blank", line)
			}
			return
		}
		if clf.N != 1 || clf.T < 0 || clf.T > algo.MaxTime || clf.Line != 0 {
			t.Fatalf("Parse(%q) = %+v, out of bounds", line, clf)
		}
		var fields logFields
		if problem := fields.split([]byte(line), false); problem != "" {
			t.Fatalf("Parse(%q) accepted a line split rejects: %s", line, problem)
		}
		tm, err := time.Parse(layout, string(fields.time))
		if err != nil || tm.UnixNano() != clf.T {
			t.Fatalf("Parse(%q): t %d; time.Parse gives %v (%d), %v", line, clf.T, tm, tm.UnixNano(), err)
		}
		if k == LogHost && !strings.HasPrefix(strings.TrimLeft(line, " "), clf.Key+" ") {
			t.Fatalf("Parse(%q): host %q is not the first word", line, clf.Key)
		}
	})
}

func BenchmarkAccessLog(b *testing.B) {
	line := []byte(clfLine + ` "http://www.example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)"`)
	for _, k := range []LogKey{LogHost, LogPath} {
		b.Run(k.String(), func(b *testing.B) {
			format := AccessLog{Combined: true, Key: k}.Parse
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if _, _, err := format(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
