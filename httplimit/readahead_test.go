package httplimit

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// postRaw sends a POST with a body of size bytes on a new connection to
// srvURL, without reading the answer, and returns the connection.
func postRaw(t *testing.T, srvURL string, size int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(srvURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", size, bytes.Repeat([]byte{'x'}, size))
	return c
}

// waitFor waits, in real time, until cond holds: what it waits for is
// the server reading a closed connection. It fails t after 10 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		runtime.Gosched()
	}
}

// TestNetHTTPCancelsOnCloseAfterBody pins what watchDisconnect relies on
// in net/http (HTTP/1.x): once a request's body has been read to its end,
// the server watches the connection and cancels the request's context
// when the client closes it.
func TestNetHTTPCancelsOnCloseAfterBody(t *testing.T) {
	read, cancelled := make(chan struct{}), make(chan struct{})
	srv := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		close(read)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second): // a guard, not a wait
		}
	}))
	c := postRaw(t, srv.URL, 1024)
	<-read
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("net/http: a request whose body was read to its end kept its context after its client closed the connection; " +
			"httplimit's watchDisconnect relies on net/http cancelling it")
	}
}

// TestShapeDisconnectUnreadBody: POST clients that close their connection
// while their request waits its turn, its body unread, are seen to go:
// their handler never runs, they are counted abandoned, and a bucket's
// units are given back (issue 28: 300 dropped POSTs of 1 KiB were all
// handled, none abandoned).
func TestShapeDisconnectUnreadBody(t *testing.T) {
	for _, tc := range []struct {
		policy  string
		dropped int
	}{{"fixed-window 10/1m", 5}, {"token-bucket 10/1m", 1}} {
		t.Run(tc.policy, func(t *testing.T) {
			l, fc := newLimiter(t, tc.policy)
			m := New(l, WithDelay(time.Minute), WithKey(Global))
			var handled atomic.Int64
			srv := server(t, m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				handled.Add(1)
				io.Copy(io.Discard, r.Body)
			})))
			t.Cleanup(func() { fc.Advance(time.Hour) }) // on failure, free the waiters before the server closes
			if d, err := l.AllowN(t.Context(), "*", 10); err != nil || !d.Allowed {
				t.Fatalf("spending the quota: %+v, %v", d, err)
			}
			var conns []net.Conn
			for i := range tc.dropped {
				conns = append(conns, postRaw(t, srv.URL, 1024))
				fc.WaitTimers(i + 1)
			}
			for _, c := range conns {
				c.Close()
			}
			waitFor(t, "the closed connections are not seen (net/http did not cancel the requests' contexts)", func() bool {
				return m.Stats().Abandoned == uint64(tc.dropped)
			})
			// A bucket's waiter held a unit (6s of the rate); it is back.
			if d, err := l.AllowN(t.Context(), "*", 0); err != nil || d.ResetAfter != time.Minute {
				t.Fatalf("after the waiters left: %+v, %v; want the quota whole in 1m, their units back", d, err)
			}
			fc.Advance(time.Minute)
			if n := handled.Load(); n != 0 {
				t.Fatalf("%d handlers ran for clients that had gone", n)
			}
		})
	}
}

// TestReadAheadBodyIntact: a body read ahead reaches the handler whole,
// short or past the read-ahead, announced or chunked.
func TestReadAheadBodyIntact(t *testing.T) {
	l, _ := newLimiter(t, "token-bucket 100/1s")
	m := New(l, WithDelay(time.Second))
	srv := server(t, m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write(b)
	})))
	for _, size := range []int{1, 1024, maxReadAhead, maxReadAhead + 1, 3 * maxReadAhead} {
		for _, chunked := range []bool{false, true} {
			body := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
			var rd io.Reader = bytes.NewReader(body)
			if chunked {
				rd = io.MultiReader(rd) // no length: sent chunked
			}
			resp, err := srv.Client().Post(srv.URL, "application/octet-stream", rd)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
				t.Errorf("%d bytes, chunked %v: status %d, %d bytes back, equal %v", size, chunked, resp.StatusCode, len(got), bytes.Equal(got, body))
			}
		}
	}
}
