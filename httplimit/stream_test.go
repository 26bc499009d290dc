package httplimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// limited wraps h in a middleware with a generous limit.
func limited(t *testing.T, h http.Handler) http.Handler {
	l, _ := newLimiter(t, "token-bucket 1000/1s")
	return New(l).Handler(h)
}

// TestWriterUnwrapped checks that the next handler gets the very
// http.ResponseWriter the server gave the middleware.
func TestWriterUnwrapped(t *testing.T) {
	seen := make(chan bool, 1)
	var outer http.ResponseWriter
	inner := limited(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- w == outer
	}))
	srv := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		outer = w
		inner.ServeHTTP(w, r)
	}))
	get(t, srv.URL)
	if !<-seen {
		t.Error("the next handler got a wrapped ResponseWriter")
	}
}

// TestStreamingFlush checks that a handler's flushed output reaches the
// client while the handler is still running.
func TestStreamingFlush(t *testing.T) {
	release := make(chan struct{})
	srv := server(t, limited(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
		w.(http.Flusher).Flush()
		<-release
		io.WriteString(w, "second\n")
	})))
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("RateLimit") == "" {
		t.Error("no RateLimit field on a streamed response")
	}
	br := bufio.NewReader(resp.Body)
	got := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if line != "first\n" {
			t.Errorf("first line %q", line)
		}
	case <-time.After(10 * time.Second): // a failure detector, not a wait
		close(release)
		t.Fatal("the flushed line did not arrive while the handler ran")
	}
	close(release)
	rest, _ := io.ReadAll(br)
	if string(rest) != "second\n" {
		t.Errorf("rest %q", rest)
	}
}

// TestHijack checks that a handler can take over the connection.
func TestHijack(t *testing.T) {
	srv := server(t, limited(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if w.Header().Get("RateLimit") == "" {
			t.Error("RateLimit not set before the handler")
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		rw.Flush()
	})))
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "hijacked" {
		t.Errorf("body %q", b)
	}
}

// TestResponseController checks the ResponseController methods that need
// the server's own writer.
func TestResponseController(t *testing.T) {
	srv := server(t, limited(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		var errs []string
		if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			errs = append(errs, "SetWriteDeadline: "+err.Error())
		}
		if err := rc.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
			errs = append(errs, "SetReadDeadline: "+err.Error())
		}
		if err := rc.EnableFullDuplex(); err != nil {
			errs = append(errs, "EnableFullDuplex: "+err.Error())
		}
		io.WriteString(w, strings.Join(errs, "; "))
	})))
	if res := get(t, srv.URL); res.status != 200 || res.body != "" {
		t.Errorf("%d %q", res.status, res.body)
	}
}
