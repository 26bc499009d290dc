package httplimit

import (
	"bytes"
	"io"
	"net/http"
	"strings"
)

// maxReadAhead is the most bytes of a request body the middleware reads
// ahead while the request waits its turn (WithDelay).
const maxReadAhead = 64 << 10

// watchDisconnect makes a waiting HTTP/1.x request's context end when its
// client goes away, by reading its body ahead, in the background.
//
// net/http (HTTP/1.x) watches a connection for the client closing it, and
// then cancels the request's context, only once the request's body has
// been read to its end: until then the connection's next bytes are the
// body's. A request whose handler waits with the body unread is never
// seen to go. So a body of at most maxReadAhead bytes is read as soon as
// the request arrives, and put back for the next handler; the bytes are
// read once, and a read error reaches the handler after the bytes read.
//
// Left alone: HTTP/2 (net/http watches its streams itself), an empty body
// (net/http watches at once), a longer body (read ahead, it would cost
// memory per waiting request), and a request with "Expect: 100-continue",
// whose client sends its body only when the server reads it.
func watchDisconnect(r *http.Request) {
	if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody || r.ContentLength > maxReadAhead ||
		strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	b := &aheadBody{rest: r.Body, done: make(chan struct{})}
	go b.readAhead()
	r.Body = b
}

// aheadBody is a request body being read ahead: its readers wait until
// the read ahead is over, then read what it read, then the rest.
type aheadBody struct {
	rest io.ReadCloser
	done chan struct{} // closed when the read ahead is over
	r    io.Reader     // set before done is closed
}

// readAhead reads the body ahead, up to maxReadAhead+1 bytes.
func (b *aheadBody) readAhead() {
	buf, err := io.ReadAll(io.LimitReader(b.rest, maxReadAhead+1))
	next := io.Reader(b.rest)
	if err != nil {
		next = errReader{err}
	}
	b.r = io.MultiReader(bytes.NewReader(buf), next)
	close(b.done)
}

// Read reads the body, once the read ahead is over.
func (b *aheadBody) Read(p []byte) (int, error) {
	<-b.done
	return b.r.Read(p)
}

// Close closes the body; it does not wait for the read ahead.
func (b *aheadBody) Close() error { return b.rest.Close() }

// errReader is a reader that fails with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
