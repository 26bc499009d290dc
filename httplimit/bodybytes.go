package httplimit

import (
	"bytes"
	"io"
	"math"
	"net/http"
)

// BodyBytes returns a cost function for WithCostFunc (or a Limit's Cost)
// that makes a request cost the bytes of its body, for a policy counting
// bytes (WithQuotaUnit("content-bytes")).
//
// A request that gives its length (Content-Length) costs that length, and
// its body is not read. A request that does not (a chunked body, or
// HTTP/2 without the header) is read ahead, up to limit+1 bytes, which are
// put back for the next handler: it costs the bytes read, and a body
// longer than limit costs limit+1. With limit the policy's burst, such a
// body is denied for good, without Retry-After, as one announced too long.
// So the middleware holds at most limit+1 bytes of a request in memory. A
// negative limit is 0.
// Counting Content-Length alone would cost a chunked body nothing (its
// ContentLength is -1): an unlimited upload.
func BodyBytes(limit int64) func(*http.Request) int64 {
	ahead := max(limit, 0) + 1 // the bytes to read ahead
	if ahead <= 0 {
		ahead = math.MaxInt64 // limit+1 overflowed
	}
	return func(r *http.Request) int64 {
		if r.ContentLength >= 0 || r.Body == nil || r.Body == http.NoBody {
			return max(r.ContentLength, 0)
		}
		read, _ := io.ReadAll(io.LimitReader(r.Body, ahead)) // an error recurs at the handler's read
		r.Body = readAhead{io.MultiReader(bytes.NewReader(read), r.Body), r.Body}
		return int64(len(read))
	}
}

// readAhead is a body whose first bytes BodyBytes has read: they come
// first, then the rest of the body, which Close closes.
type readAhead struct {
	io.Reader
	io.Closer
}
