package redisstore

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// read reads one value of in, and returns it and what of in is left.
func read(in string) (v any, push []any, rest string, err error) {
	r := bufio.NewReader(strings.NewReader(in))
	v, push, err = readValue(r)
	b, _ := io.ReadAll(r)
	return v, push, string(b), err
}

// Each RESP3 type the tracker reads, as Redis 7 writes it, and what
// follows the value left unread.
func TestReadValue(t *testing.T) {
	for _, c := range []struct {
		in   string
		v    any
		push []any
	}{
		{"+OK\r\n", "OK", nil},
		{":42\r\n", "42", nil},
		{",3.5\r\n", "3.5", nil},
		{"(3492890328409238509324850943850943825024385\r\n", "3492890328409238509324850943850943825024385", nil},
		{"#t\r\n", "t", nil},
		{"_\r\n", nil, nil},
		{"$5\r\nhe\r\no\r\n", "he\r\no", nil},
		{"$0\r\n\r\n", "", nil},
		{"$-1\r\n", nil, nil},
		{"*-1\r\n", nil, nil},
		{"=8\r\ntxt:abcd\r\n", "txt:abcd", nil},
		{"-ERR no\r\n", replyError("ERR no"), nil},
		{"!9\r\nERR a\r\nb!\r\n", replyError("ERR a\r\nb!"), nil},
		{"*2\r\n$1\r\na\r\n:1\r\n", []any{"a", "1"}, nil},
		{"~1\r\n+x\r\n", []any{"x"}, nil},
		{"%1\r\n+k\r\n*1\r\n+v\r\n", []any{"k", []any{"v"}}, nil},
		{"|1\r\n+ttl\r\n:3\r\n+value\r\n", "value", nil},
		{">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", nil, []any{"invalidate", []any{"k"}}},
		{">2\r\n$10\r\ninvalidate\r\n_\r\n", nil, []any{"invalidate", nil}},
	} {
		v, push, rest, err := read(c.in + "+next\r\n")
		if err != nil || !reflect.DeepEqual(v, c.v) || !reflect.DeepEqual(push, c.push) || rest != "+next\r\n" {
			t.Errorf("readValue(%q) = %#v, push %#v, %v, left %q; want %#v, push %#v, +next left", c.in, v, push, err, rest, c.v, c.push)
		}
	}
}

// Input that is not RESP3 is a clear error, wrapping errRESP, or the
// reader's (a value cut short): never a panic, nor a value.
func TestReadValueMalformed(t *testing.T) {
	nested := strings.Repeat("*1\r\n", maxDepth+1) + ":1\r\n"
	for _, in := range []string{
		"OK\r\n", "+OK\n", "\r\n", "?x\r\n", "$x\r\n", "$-2\r\n", "$3\r\nabcd\r\n",
		"*1048577\r\n", "$1048577\r\n", "*-3\r\n", nested,
		"+" + strings.Repeat("x", 5000) + "\r\n",
	} {
		if v, push, _, err := read(in); !errors.Is(err, errRESP) || v != nil || push != nil {
			t.Errorf("readValue(%.40q) = %v, push %v, %v; want an error wrapping errRESP", in, v, push, err)
		}
	}
	for _, in := range []string{"", "+OK", "$3\r\nab", "*2\r\n:1\r\n", "|1\r\n+a\r\n+b\r\n"} {
		if _, _, _, err := read(in); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("readValue(%q), cut short: %v, want EOF", in, err)
		}
	}
}

// writeCommand writes an array of bulk strings, which readValue reads
// back.
func TestWriteCommand(t *testing.T) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	args := []string{"SET", "k\r\n", "", "PX", "10000"}
	writeCommand(w, args...)
	w.Flush()
	if want := "*5\r\n$3\r\nSET\r\n$3\r\nk\r\n\r\n$0\r\n\r\n$2\r\nPX\r\n$5\r\n10000\r\n"; b.String() != want {
		t.Errorf("writeCommand wrote %q, want %q", b.String(), want)
	}
	v, _, rest, err := read(b.String())
	if want := []any{"SET", "k\r\n", "", "PX", "10000"}; err != nil || !reflect.DeepEqual(v, want) || rest != "" {
		t.Errorf("read back: %#v %v, left %q", v, err, rest)
	}
}

// FuzzReadValue: readValue never panics; a value it reads is the frame
// it consumed, no byte more (the same value read from those bytes alone,
// and none from one byte fewer); and it allocates at most a bulk string's
// bound plus a bounded multiple of its input.
func FuzzReadValue(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "$5\r\nhello\r\n", "*2\r\n:1\r\n_\r\n", "%1\r\n+a\r\n~1\r\n#f\r\n",
		">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n", "|1\r\n+a\r\n+b\r\n-ERR x\r\n", "!3\r\nERR\r\n", "*1048576\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := bufio.NewReader(bytes.NewReader(in))
		v, push, err := readValue(r)
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > maxBulk+2+64<<10+uint64(256*len(in)) {
			t.Fatalf("readValue of %d bytes allocated %d bytes", len(in), alloc)
		}
		if err != nil {
			return
		}
		rest, _ := io.ReadAll(r)
		frame := in[:len(in)-len(rest)]
		v2, push2, err2 := readValue(bufio.NewReader(bytes.NewReader(frame)))
		if err2 != nil || !reflect.DeepEqual(v, v2) || !reflect.DeepEqual(push, push2) {
			t.Fatalf("the frame %q alone reads %#v %#v %v, with what follows %#v %#v", frame, v2, push2, err2, v, push)
		}
		if _, _, err := readValue(bufio.NewReader(bytes.NewReader(frame[:len(frame)-1]))); err == nil {
			t.Fatalf("the frame %q less its last byte reads as a value", frame)
		}
	})
}
