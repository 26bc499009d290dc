package redisstore

import (
	"bufio"
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// rawConn is a RESP3 connection for pinning Redis's tracking: each
// command's reply, and the invalidations pushed before it.
type rawConn struct {
	t *testing.T
	r *bufio.Reader
	w *bufio.Writer
}

func dialRaw(t *testing.T, srv *redistest.Server) *rawConn {
	conn, err := net.Dial(srv.Network(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
}

// do sends cmd and returns its reply and the keys of the invalidations
// read before it ("*" for a null one: a flush).
func (c *rawConn) do(cmd ...string) (reply any, invalidated []string) {
	c.t.Helper()
	writeCommand(c.w, cmd...)
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
	for {
		v, push, err := readValue(c.r)
		if err != nil {
			c.t.Fatalf("%v: %v", cmd, err)
		}
		if push == nil {
			if e, ok := v.(replyError); ok {
				c.t.Fatalf("Redis refused %v: %v", cmd, e)
			}
			return v, invalidated
		}
		keys, ok := push[1].([]any)
		if !ok {
			invalidated = append(invalidated, "*")
		}
		for _, k := range keys {
			invalidated = append(invalidated, k.(string))
		}
	}
}

// The Redis semantics of CLIENT TRACKING ON OPTIN that the deny cache
// relies on (invariant 1 in denycache.go): a read is tracked only when
// CLIENT CACHING YES comes right before it, an absent key's included; a
// write of a tracked key, by anyone, pushes one invalidation, before the
// reply of any later command on the tracking connection; the key is then
// forgotten, and its next write pushes nothing; a write of a key never
// read pushes nothing; a flush pushes a null invalidation.
func TestRedisOptInTracking(t *testing.T) {
	srv := redistest.NewServer(t)
	writer := srv.Client(t)
	ctx := context.Background()
	tr := dialRaw(t, srv)
	tr.do("HELLO", "3")
	tr.do("CLIENT", "TRACKING", "ON", "OPTIN")
	tr.do("CLIENT", "CACHING", "YES")
	tr.do("GET", "cached")   // tracked
	tr.do("PTTL", "after")   // not: CACHING YES covers one command
	tr.do("GET", "uncached") // not
	tr.do("CLIENT", "CACHING", "YES")
	tr.do("GET", "absent") // tracked, though absent
	write := func(keys ...string) []string {
		t.Helper()
		for _, k := range keys {
			if err := writer.Set(ctx, k, "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
		_, inv := tr.do("PING")
		slices.Sort(inv)
		return inv
	}
	if got, want := write("cached", "after", "uncached", "absent", "never-read"), []string{"absent", "cached"}; !slices.Equal(got, want) {
		t.Fatalf("Redis pushed invalidations of %q before a later PONG, want %q: OPTIN tracking is not what the deny cache assumes", got, want)
	}
	if got := write("cached", "absent"); len(got) != 0 {
		t.Fatalf("Redis pushed invalidations of %q for a second write, want none: it no longer forgets a key once invalidated", got)
	}
	tr.do("CLIENT", "CACHING", "YES")
	tr.do("HGETALL", "hash")
	if err := writer.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, got := tr.do("PING"); !slices.Equal(got, []string{"*"}) {
		t.Fatalf("Redis pushed %q on FLUSHALL to an OPTIN client, want one null invalidation", got)
	}
}
