package redisstore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The tracker speaks RESP3 itself, on a connection of its own, rather
// than through go-redis's push-notification support (v9: a
// push.NotificationHandler registered on the client). The deny cache
// needs three things that go-redis does not give:
//
//  1. Invalidations applied as they arrive. go-redis reads a pooled
//     connection's pushes only when a command runs on it, or when it goes
//     back to the pool; between commands they wait in the socket.
//  2. The end of the one tracked connection seen at once. Tracking is a
//     connection's state; go-redis's pool closes and replaces connections
//     by itself (errors, idle and age limits), and the entries that
//     connection vouched for must go at that instant (invariant 4).
//  3. Replies and pushes in the order Redis sent them, on one connection,
//     so that a PING's answer proves every earlier invalidation applied
//     (tracker.sync).
//
// What it reads is small: the replies to a few commands (HELLO, CLIENT,
// SELECT, SET, GET, PING) and invalidate pushes. readValue is fuzzed
// (FuzzReadValue): it never panics, never reads past the value's frame,
// and allocates at most maxBulk bytes plus a bounded multiple of its
// input.

// writeCommand writes a command as a RESP array of bulk strings.
func writeCommand(w *bufio.Writer, args ...string) {
	w.WriteByte('*')
	w.WriteString(strconv.Itoa(len(args)))
	w.WriteString("\r\n")
	for _, a := range args {
		w.WriteByte('$')
		w.WriteString(strconv.Itoa(len(a)))
		w.WriteString("\r\n")
		w.WriteString(a)
		w.WriteString("\r\n")
	}
}

// replyError is an error reply.
type replyError string

func (e replyError) Error() string { return string(e) }

// maxBulk bounds a bulk string the tracker reads (a key, a state), and
// the elements of an aggregate.
const maxBulk = 1 << 20

// maxDepth bounds the nesting of aggregates: the deepest reply the
// tracker reads, HELLO's, nests three deep.
const maxDepth = 8

// errRESP is the error of input that is not RESP3.
var errRESP = errors.New("redisstore: malformed RESP3")

// readValue reads one RESP3 value: strings as strings, aggregates as
// []any, null as nil; a push comes back as push (its elements) with v nil.
// Within an aggregate, a push is nil and an attribute is skipped.
func readValue(r *bufio.Reader) (v any, push []any, err error) {
	return readNested(r, 0)
}

// readNested is readValue's for a value nested depth aggregates deep.
func readNested(r *bufio.Reader, depth int) (v any, push []any, err error) {
	kind, body, err := readLine(r)
	if err != nil {
		return nil, nil, err
	}
	switch kind {
	case '+', ':', ',', '(', '#':
		return body, nil, nil
	case '-':
		return replyError(body), nil, nil
	case '_':
		return nil, nil, nil
	case '$', '=', '!':
		return readBulk(r, kind, body)
	case '*', '~', '>', '%', '|':
		return readAggregate(r, kind, body, depth)
	}
	return nil, nil, fmt.Errorf("%w: an unknown type %q", errRESP, kind)
}

// readLine reads a line of at most the reader's buffer size: its type
// byte, and the rest without the CRLF.
func readLine(r *bufio.Reader) (kind byte, body string, err error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return 0, "", fmt.Errorf("%w: a line longer than %d bytes", errRESP, r.Size())
	}
	if err != nil {
		return 0, "", err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return 0, "", fmt.Errorf("%w: a line %q", errRESP, line)
	}
	return line[0], string(line[1 : len(line)-2]), nil
}

// readLength parses the length of a bulk string or an aggregate: -1 is
// a null, and the most is maxBulk.
func readLength(body string) (int, error) {
	n, err := strconv.Atoi(body)
	if err != nil || n < -1 || n > maxBulk {
		return 0, fmt.Errorf("%w: a length %q", errRESP, body)
	}
	return n, nil
}

// readBulk reads the bytes of a bulk string, a verbatim string or a blob
// error of length body, and their CRLF.
func readBulk(r *bufio.Reader, kind byte, body string) (any, []any, error) {
	n, err := readLength(body)
	if err != nil || n < 0 {
		return nil, nil, err
	}
	b := make([]byte, n+2)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, nil, err
	}
	if b[n] != '\r' || b[n+1] != '\n' {
		return nil, nil, fmt.Errorf("%w: a string of %d bytes not ended by CRLF", errRESP, n)
	}
	if kind == '!' {
		return replyError(b[:n]), nil, nil
	}
	return string(b[:n]), nil, nil
}

// readAggregate reads the elements of an aggregate of length body, depth
// aggregates deep: a map's and an attribute's pairs flat, an attribute
// skipped for the value that follows it.
func readAggregate(r *bufio.Reader, kind byte, body string, depth int) (any, []any, error) {
	n, err := readLength(body)
	if err != nil || n < 0 {
		return nil, nil, err
	}
	if depth >= maxDepth {
		return nil, nil, fmt.Errorf("%w: aggregates nested deeper than %d", errRESP, maxDepth)
	}
	if kind == '%' || kind == '|' {
		n *= 2
	}
	elems := make([]any, 0, min(n, 16)) // grown as elements come: a length costs nothing
	for range n {
		v, _, err := readNested(r, depth+1)
		if err != nil {
			return nil, nil, err
		}
		elems = append(elems, v)
	}
	switch kind {
	case '>':
		return nil, elems, nil
	case '|':
		return readNested(r, depth)
	}
	return elems, nil, nil
}
