package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/floodgate/floodgate/internal/seconds"
)

// ParseLine is the Format of floodgate's own traces, described in the
// package documentation: a line is a JSON object when its first non-space
// byte is '{', else T [KEY [N]] text; it reports ok false for a blank line
// and for a comment, whose first non-space byte is '#'. Spaces here are
// spaces and tabs. ParseLine leaves the event's Line 0.
//
// JSON strings are decoded as encoding/json decodes them: invalid UTF-8
// and lone surrogate escapes become U+FFFD. A text key is taken byte for
// byte, invalid UTF-8 included.
func ParseLine(line []byte) (ev Event, ok bool, err error) {
	rest := bytes.TrimLeft(line, " \t")
	switch {
	case len(rest) == 0 || rest[0] == '#':
		return Event{}, false, nil
	case rest[0] == '{':
		ev, err = parseJSON(line)
	default:
		ev, err = parseText(rest)
	}
	if err != nil {
		return Event{}, false, err
	}
	return ev, true, nil
}

// parseText parses T [KEY [N]].
func parseText(line []byte) (Event, error) {
	f := bytes.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
	if len(f) > 3 {
		return Event{}, fmt.Errorf(`%w: %d fields, want T [KEY [N]] (write a key with spaces in JSON: {"t": 1, "key": "a b"})`, ErrSyntax, len(f))
	}
	ev := Event{N: 1}
	var err error
	if ev.T, err = seconds.Parse(string(f[0])); err != nil {
		return Event{}, fmt.Errorf("t %w", err)
	}
	if len(f) > 1 {
		ev.Key = string(f[1])
	}
	if len(f) > 2 {
		if ev.N, err = seconds.ParseCount(string(f[2])); err != nil {
			return Event{}, fmt.Errorf("n %w", err)
		}
	}
	return ev, nil
}

// parseJSON parses a line whose first non-space byte is '{' as one JSON
// object. It checks the whole line with json.Valid, which is fast, and then
// only walks the object's top-level fields.
func parseJSON(line []byte) (Event, error) {
	if !json.Valid(line) {
		err := json.Unmarshal(line, new(json.RawMessage)) // for the message
		return Event{}, fmt.Errorf("%w: invalid JSON: %v", ErrSyntax, err)
	}
	ev := Event{N: 1}
	var seenT, seenKey, seenN bool
	i := bytes.IndexByte(line, '{') + 1
	for {
		i = skipSpace(line, i)
		if line[i] == '}' {
			break
		}
		nameEnd := stringEnd(line, i)
		name := line[i:nameEnd]
		i = skipSpace(line, nameEnd) + 1 // after the ':'
		i = skipSpace(line, i)
		end := valueEnd(line, i)
		value := line[i:end]
		i = skipSpace(line, end)
		if line[i] == ',' {
			i++
		}
		var field string
		var seen *bool
		switch string(unquote(name)) {
		case "t":
			field, seen = "t", &seenT
		case "key":
			field, seen = "key", &seenKey
		case "n":
			field, seen = "n", &seenN
		default: // an extra field, ignored
			continue
		}
		if *seen {
			return Event{}, fmt.Errorf("%w: %q given twice", ErrSyntax, field)
		}
		*seen = true
		if err := setField(&ev, field, value); err != nil {
			return Event{}, err
		}
	}
	if !seenT {
		return Event{}, fmt.Errorf(`%w: no "t" in the JSON object`, ErrSyntax)
	}
	return ev, nil
}

// setField sets the event's field name from its JSON value.
func setField(ev *Event, name string, value []byte) error {
	var err error
	switch c := value[0]; {
	case c == '-' || '0' <= c && c <= '9':
		switch name {
		case "t":
			if ev.T, err = seconds.Parse(string(value)); err != nil {
				return fmt.Errorf("t %w", err)
			}
			return nil
		case "n":
			if ev.N, err = seconds.ParseCount(string(value)); err != nil {
				return fmt.Errorf("n %w", err)
			}
			return nil
		}
	case c == '"':
		if name == "key" {
			ev.Key = string(unquote(value))
			return nil
		}
	case c == 'n': // null
		if name != "t" {
			return nil // null is the default
		}
	}
	want := "a number"
	if name == "key" {
		want = "a string"
	}
	return fmt.Errorf("%w: %q is %s, want %s", ErrSyntax, name, jsonType(value[0]), want)
}

// The helpers below walk JSON that json.Valid accepted.

// unquote returns the contents of the JSON string quoted, decoded as
// encoding/json decodes strings (invalid UTF-8 becomes U+FFFD).
func unquote(quoted []byte) []byte {
	inner := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner
	}
	var s string
	json.Unmarshal(quoted, &s) // cannot fail on a valid JSON string
	return []byte(s)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index just after the string that starts at b[i].
func stringEnd(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

// valueEnd returns the index just after the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(b) && strings.IndexByte(",}] \t\r\n", b[i]) < 0 {
		i++
	}
	return i
}

// jsonType names the type of the JSON value that begins with c.
func jsonType(c byte) string {
	switch c {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
