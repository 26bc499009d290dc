package trace

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/seconds"
)

// readAll reads every event of in, and the error that ended the trace
// (nil for io.EOF).
func readAll(in io.Reader) ([]Event, error) {
	r := NewReader(in)
	var evs []Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Event
	}{
		{"empty", "", nil},
		{"only blank lines and comments", "\n  \n\t\n# a comment\n  # another\n", nil},
		{"text", "12.345 alice 2\n", []Event{{1, 12_345_000_000, "alice", 2}}},
		{"text defaults", "1\n2 bob\n", []Event{{1, 1e9, "", 1}, {2, 2e9, "bob", 1}}},
		{"text spacing", " \t3\t carol  0 \t\n", []Event{{1, 3e9, "carol", 0}}},
		{"JSON", `{"t": 12.345, "key": "alice", "n": 1}`, []Event{{1, 12_345_000_000, "alice", 1}}},
		{"JSON defaults", `{"t": 1}` + "\n" + `{"t": 2, "key": null, "n": null}`,
			[]Event{{1, 1e9, "", 1}, {2, 2e9, "", 1}}},
		{"JSON field order and extra fields", ` {"n": 2.0, "extra": {"a": [1, "}"]}, "key": "k", "T": 9, "t": 1.5e3}`,
			[]Event{{1, 1_500_000_000_000, "k", 2}}},
		{"JSON escapes", `{"t":0,"key":"a \"b\"\\\n\u00e9\ud83d\ude00<&>"}`, []Event{{1, 0, "a \"b\"\\\né😀<&>", 1}}},
		{"mixed, numbered over every line", "# header\n\n1 a\n{\"t\":1,\"key\":\"b\"}\n\n2 a 3\n",
			[]Event{{3, 1e9, "a", 1}, {4, 1e9, "b", 1}, {6, 2e9, "a", 3}}},
		{"JSON spacing and escaped names", "\t{ \"\\u0074\" :\t3 , \"k\\\"ey\" : 1, \"key\":\"\\u0041\" }  ", []Event{{1, 3e9, "A", 1}}},
		{"JSON nested extras with brackets in strings", `{"a": {"b": ["]}", {"c": "\\\""}]}, "t": 1, "z": [[]], "y": -1.5e-3, "x": false}`, []Event{{1, 1e9, "", 1}}},
		{"JSON invalid UTF-8 key", "{\"t\": 1, \"key\": \"a\xffb\"}", []Event{{1, 1e9, "a\ufffdb", 1}}},
		{"CRLF", "1 a\r\n2 b\r\n\r\n3\r\n", []Event{{1, 1e9, "a", 1}, {2, 2e9, "b", 1}, {4, 3e9, "", 1}}},
		{"no final newline", "1 a\n2 b", []Event{{1, 1e9, "a", 1}, {2, 2e9, "b", 1}}},
		{"equal times", "5 a\n5 b\n5.0 a\n", []Event{{1, 5e9, "a", 1}, {2, 5e9, "b", 1}, {3, 5e9, "a", 1}}},
		{"invalid UTF-8 text keys stay distinct", "1 \xff\n1 \xfe\n", []Event{{1, 1e9, "\xff", 1}, {2, 1e9, "\xfe", 1}}},
		{"key that looks like a comment", "1 #x\n", []Event{{1, 1e9, "#x", 1}}},
		{"exact times", "0.000000001\n0.0000000020\n2e-9\n", []Event{{1, 1, "", 1}, {2, 2, "", 1}, {3, 2, "", 1}}},
		{"byte-order mark", "\uFEFF0 alice\n1 \uFEFFbob\n", []Event{{1, 0, "alice", 1}, {2, 1e9, "\uFEFFbob", 1}}},
		{"long key", "1 " + strings.Repeat("k", 200_000) + " 2\n3\n", []Event{{1, 1e9, strings.Repeat("k", 200_000), 2}, {2, 3e9, "", 1}}},
		{"longest line", "1 " + strings.Repeat("k", MaxLineSize-2) + "\r\n2\n", []Event{{1, 1e9, strings.Repeat("k", MaxLineSize-2), 1}, {2, 2e9, "", 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %+.80v\nwant %+.80v", got, tt.want)
			}
		})
	}
}

func TestReaderErrors(t *testing.T) {
	const (
		tSyntax = `: invalid number (want seconds like 12.5, 0.001 or 1.5e3)`
		tRange  = `: out of range (want 0 to 4611686018.427387904 seconds)`
		nSyntax = `: invalid number (want a whole number like 1 or 2e0)`
		nRange  = `: out of range (want 0 to 9223372036854775807)`
	)
	tests := []struct {
		name string
		in   string
		good int   // events read before the error
		want error // the sentinel
		msg  string
	}{
		{"text: bad time", "1 a\nabc\n", 1, ErrNumber, `line 2: t "abc"` + tSyntax},
		{"text: time with a comma", "1,5\n", 0, ErrNumber, `line 1: t "1,5"` + tSyntax},
		{"text: ten decimals", "1 a\n1.0000000005 a\n", 1, ErrNumber,
			`line 2: t "1.0000000005": invalid number (more than nine decimals: times are whole nanoseconds)`},
		{"text: a long bad time, clipped", strings.Repeat("9", 500) + "x a\n", 0, ErrNumber, `line 1: t "` + strings.Repeat("9", 64) + `..."` + tSyntax},
		{"text: negative time", "-1 a\n", 0, ErrRange, `line 1: t "-1"` + tRange},
		{"text: time too late", "4611686019\n", 0, ErrRange, `line 1: t "4611686019"` + tRange},
		{"text: fractional cost", "1 a 1.5\n", 0, ErrNumber, `line 1: n "1.5"` + nSyntax},
		{"text: cost not a number", "1 a b\n", 0, ErrNumber, `line 1: n "b"` + nSyntax},
		{"text: negative cost", "1 a -1\n", 0, ErrRange, `line 1: n "-1"` + nRange},
		{"text: cost overflows", "1 a 9223372036854775808\n", 0, ErrRange, `line 1: n "9223372036854775808"` + nRange},
		{"text: too many fields", "\n\n1 alice smith 1\n", 0, ErrSyntax,
			`line 3: malformed line: 4 fields, want T [KEY [N]] (write a key with spaces in JSON: {"t": 1, "key": "a b"})`},
		{"JSON: time not a number", `{"t": "12"}`, 0, ErrSyntax, `line 1: malformed line: "t" is a string, want a number`},
		{"JSON: time null", `{"t": null}`, 0, ErrSyntax, `line 1: malformed line: "t" is null, want a number`},
		{"JSON: time an array", `{"t": [1]}`, 0, ErrSyntax, `line 1: malformed line: "t" is an array, want a number`},
		{"JSON: no time", `{"key": "a"}`, 0, ErrSyntax, `line 1: malformed line: no "t" in the JSON object`},
		{"JSON: time field in another case", `{"T": 1}`, 0, ErrSyntax, `line 1: malformed line: no "t" in the JSON object`},
		{"JSON: time twice", `{"t": 1, "t": 2}`, 0, ErrSyntax, `line 1: malformed line: "t" given twice`},
		{"JSON: negative time", `{"t": -0.5}`, 0, ErrRange, `line 1: t "-0.5"` + tRange},
		{"JSON: huge time", `{"t": 1e400}`, 0, ErrRange, `line 1: t "1e400"` + tRange},
		{"JSON: key a number", `{"t": 1, "key": 7}`, 0, ErrSyntax, `line 1: malformed line: "key" is a number, want a string`},
		{"JSON: key an object", `{"t": 1, "key": {}}`, 0, ErrSyntax, `line 1: malformed line: "key" is an object, want a string`},
		{"JSON: key twice", `{"t": 1, "key": "a", "key": "b"}`, 0, ErrSyntax, `line 1: malformed line: "key" given twice`},
		{"JSON: cost a boolean", `{"t": 1, "n": true}`, 0, ErrSyntax, `line 1: malformed line: "n" is a boolean, want a number`},
		{"JSON: cost a string", `{"t": 1, "n": "2"}`, 0, ErrSyntax, `line 1: malformed line: "n" is a string, want a number`},
		{"JSON: fractional cost", `{"t": 1, "n": 1.5}`, 0, ErrNumber, `line 1: n "1.5"` + nSyntax},
		{"JSON: negative cost", `{"t": 1, "n": -1}`, 0, ErrRange, `line 1: n "-1"` + nRange},
		{"JSON: cost overflows", `{"t": 1, "n": 1e19}`, 0, ErrRange, `line 1: n "1e19"` + nRange},
		{"JSON: trailing comma", `{"t": 1,}`, 0, ErrSyntax,
			`line 1: malformed line: invalid JSON: invalid character '}' looking for beginning of object key string`},
		{"JSON: leading zero", `{"t": 01}`, 0, ErrSyntax,
			`line 1: malformed line: invalid JSON: invalid character '1' after object key:value pair`},
		{"JSON: bad extra field", `{"t": 1, "x": tru}`, 0, ErrSyntax,
			`line 1: malformed line: invalid JSON: invalid character '}' in literal true (expecting 'e')`},
		{"JSON: unterminated", "0 a\n{\"t\": 1\n", 1, ErrSyntax, `line 2: malformed line: invalid JSON: unexpected end of JSON input`},
		{"JSON: unterminated string", `{"t": 1, "key": "a}`, 0, ErrSyntax, `line 1: malformed line: invalid JSON: unexpected end of JSON input`},
		{"JSON: two objects", `{"t": 1} {"t": 2}`, 0, ErrSyntax, `line 1: malformed line: invalid JSON: invalid character '{' after top-level value`},
		{"JSON: trailing text", `{"t": 1} x`, 0, ErrSyntax,
			`line 1: malformed line: invalid JSON: invalid character 'x' after top-level value`},
		{"JSON: extra brace", `{"t": 1}}`, 0, ErrSyntax,
			`line 1: malformed line: invalid JSON: invalid character '}' after top-level value`},
		{"JSON: a name that is not a string", `{1: 2}`, 0, ErrSyntax, `line 1: malformed line: invalid JSON: invalid character '1' looking for beginning of object key string`},
		{"backwards", "# t in seconds\n10 a\n10 b\n\n9.5 a\n", 2, ErrOrder,
			`line 5: time goes backwards: t 9.5 is before t 10 on line 3 (traces must be in time order)`},
		{"backwards by a nanosecond", "0.000000002\n0.000000001\n", 1, ErrOrder,
			`line 2: time goes backwards: t 0.000000001 is before t 0.000000002 on line 1 (traces must be in time order)`},
		{"line too long", "1 a\n1 " + strings.Repeat("k", MaxLineSize-1) + "\n", 1, ErrLineTooLong,
			`line 2: line too long (more than 1048576 bytes)`},
		{"line too long, no newline", "1 a\n\n" + strings.Repeat(" ", 3*MaxLineSize), 1, ErrLineTooLong,
			`line 3: line too long (more than 1048576 bytes)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readAll(strings.NewReader(tt.in))
			if len(got) != tt.good {
				t.Errorf("read %d events before the error, want %d", len(got), tt.good)
			}
			var lerr *LineError
			if !errors.Is(err, tt.want) || !errors.As(err, &lerr) || err.Error() != tt.msg {
				t.Fatalf("err = %v\nwant %s (%v, a *LineError)", err, tt.msg, tt.want)
			}
		})
	}
}

func TestReaderRepeatsError(t *testing.T) {
	r := NewReader(strings.NewReader("x\n1\n"))
	_, err1 := r.Next()
	_, err2 := r.Next()
	if err1 == nil || err2 != err1 {
		t.Errorf("Next after %v returned %v, want the same error", err1, err2)
	}
}

func TestReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("1 a\n2"), iotest.ErrReader(boom)))
	if ev, err := r.Next(); err != nil || ev.Key != "a" {
		t.Fatalf("Next = %+v, %v", ev, err)
	}
	if _, err := r.Next(); err != boom {
		t.Errorf("Next = %v, want the reader's error as it is", err)
	}
}

func TestReaderFormat(t *testing.T) {
	// A format of KEY,SECONDS lines, which keeps the Reader's numbering and
	// time-order check.
	csv := func(line []byte) (Event, bool, error) {
		key, sec, ok := bytes.Cut(line, []byte(","))
		if !ok {
			return Event{}, false, ErrSyntax
		}
		t, err := seconds.Parse(string(sec))
		return Event{T: t, Key: string(key), N: 1}, err == nil, err
	}
	r := NewReader(strings.NewReader("a,1\nb,2\nc,1\n"))
	r.Format = csv
	var got []Event
	for {
		ev, err := r.Next()
		if err != nil {
			if !errors.Is(err, ErrOrder) || err.Error() != "line 3: time goes backwards: t 1 is before t 2 on line 2 (traces must be in time order)" {
				t.Errorf("err = %v", err)
			}
			break
		}
		got = append(got, ev)
	}
	if want := []Event{{1, 1e9, "a", 1}, {2, 2e9, "b", 1}}; !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// FuzzReader feeds arbitrary bytes to a Reader: it must not panic, every
// event must be in range and in time order, and every error but io.EOF
// must be a *LineError.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"12.345 alice 1\n13 bob\n# c\n\n14\n",
		`{"t": 12.345, "key": "alice", "n": 1}` + "\n" + `{"t": 13, "x": [1, {"y": null}]}`,
		"1e3 k 2e0\r\n1000.0000000005 k 0\n",
		`{"t":1,"key":"\u00e9\ud800\"","n":null}`,
		"5\n4\n",
		"1 a b c\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		var last int64
		for {
			ev, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var lerr *LineError
				if !errors.As(err, &lerr) || lerr.Line < 1 {
					t.Fatalf("error %v is not a *LineError with a line number", err)
				}
				return
			}
			if ev.T < last || ev.T > algo.MaxTime || ev.N < 0 || ev.Line < 1 {
				t.Fatalf("bad event %+v after t %d", ev, last)
			}
			last = ev.T
		}
	})
}
