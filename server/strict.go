package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// fieldError is what strictBody finds wrong with a body, as a 400's
// message.
type fieldError string

func (e fieldError) Error() string { return string(e) }

// strictBody checks what encoding/json lets through: bytes that are not
// UTF-8 (which it would turn into U+FFFD, so that two different keys
// become one), and in every object of the body a field given twice (which
// it would let the last win) or spelt in other than lower case, as every
// field of the API is (which it would match to the field regardless of
// case). Syntax errors are left to the decoder, which says where.
func strictBody(body []byte) error {
	if !utf8.Valid(body) {
		i := 0
		for i < len(body) {
			r, n := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return fieldError(fmt.Sprintf("the body is not valid UTF-8 (at byte %d): JSON is UTF-8", i))
	}
	if err := scanBody(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	err := strictValue(dec)
	var fe fieldError
	if errors.As(err, &fe) {
		return err
	}
	return nil // a syntax error: Decode reports it
}

// strictValue reads one JSON value from dec, checking the fields of every
// object in it.
func strictValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return strictObject(dec)
	case json.Delim('['):
		for dec.More() {
			if err := strictValue(dec); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ]
		return err
	}
	return nil
}

// strictObject reads the rest of an object whose { dec has read.
func strictObject(dec *json.Decoder) error {
	var seen []string // an object of the API has a few fields
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := tok.(string)
		if !lowerASCII(name) {
			return fieldError(fmt.Sprintf("field %q: fields are spelt in lower case, as documented", name))
		}
		for _, s := range seen {
			if s == name {
				return fieldError(fmt.Sprintf("field %q is given twice", name))
			}
		}
		seen = append(seen, name)
		if err := strictValue(dec); err != nil {
			return err
		}
	}
	_, err := dec.Token() // }
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// lowerASCII reports whether s has no upper-case ASCII letter.
func lowerASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return false
		}
	}
	return true
}

// maxNesting is how deeply a request's body may nest arrays and objects.
// The API's bodies nest three levels ({"checks":[{...}]}); the bound is
// checked before anything recurses, so that a hostile body of a million
// brackets costs no stack (strictValue recurses once a level).
const maxNesting = 16

// scanBody reads body once, outside the decoder, for what must be refused
// before any recursion: nesting deeper than maxNesting, and a \u escape of
// a UTF-16 surrogate that is not one half of a pair, which encoding/json
// would turn into U+FFFD.
func scanBody(body []byte) error {
	inString, depth := false, 0
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c == '"':
			inString = !inString
		case inString && c == '\\':
			n, ok := escape(body, i)
			if !ok {
				return fieldError(fmt.Sprintf("a \\u escape at byte %d is half a UTF-16 surrogate pair, not a character", i))
			}
			i += n
		case inString:
		case c == '[' || c == '{':
			if depth++; depth > maxNesting {
				return fieldError(fmt.Sprintf("the body nests arrays and objects deeper than %d levels (at byte %d); requests nest three", maxNesting, i))
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return nil
}

// escape returns how many bytes after body[i], a backslash in a string,
// belong to its escape, and false for a \u escape of a lone surrogate.
func escape(body []byte, i int) (int, bool) {
	if i+1 >= len(body) {
		return 0, true
	}
	if body[i+1] != 'u' {
		return 1, true // an escaped character, \" included
	}
	switch r := hex4(body, i+2); {
	case 0xD800 <= r && r < 0xDC00:
		if i+7 < len(body) && body[i+6] == '\\' && body[i+7] == 'u' {
			if lo := hex4(body, i+8); 0xDC00 <= lo && lo < 0xE000 {
				return 11, true
			}
		}
		return 0, false
	case 0xDC00 <= r && r < 0xE000:
		return 0, false
	}
	return 5, true
}

// hex4 returns the value of the four hex digits at body[i:], or -1.
func hex4(body []byte, i int) rune {
	if i+4 > len(body) {
		return -1
	}
	var r rune
	for _, c := range body[i : i+4] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(d)
	}
	return r
}
