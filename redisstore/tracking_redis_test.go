package redisstore

import (
	"bufio"
	"context"
	"net"
	"slices"
	"strings"
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

// The Redis semantics of the events that replace a tracked key or a
// whole database, which the deny cache relies on: FLUSHDB ASYNC and
// DEBUG RELOAD push a null invalidation; RESTORE, COPY (in or across
// databases) and RENAME onto a tracked key, and MOVE of a key of that
// name into its database, push the key's; but SWAPDB pushes nothing,
// so that the tracker checks a marker key of its own with each ping
// (tracker.pong): a SET ... GET there returns the value set in the
// database swapped away, not the last one set.
func TestRedisSwapDBTracking(t *testing.T) {
	srv := redistest.NewServer(t, redistest.Args("--enable-debug-command", "yes"))
	w := dialRaw(t, srv)
	w.do("SET", "src", "v")
	dump, _ := w.do("DUMP", "src")
	tr := dialRaw(t, srv)
	tr.do("HELLO", "3")
	tr.do("CLIENT", "TRACKING", "ON", "OPTIN")
	for _, ev := range []struct {
		cmd  []string
		want string
	}{
		{[]string{"FLUSHDB", "ASYNC"}, "*"},
		{[]string{"DEBUG", "RELOAD"}, "*"},
		{[]string{"RESTORE", "k", "0", dump.(string), "REPLACE"}, "k"},
		{[]string{"COPY", "src", "k", "REPLACE"}, "k"},
		{[]string{"COPY", "src", "k", "DB", "0", "REPLACE"}, "k"},
		{[]string{"RENAME", "src", "k"}, "k"},
		{[]string{"MOVE", "src", "0"}, "k"},
		{[]string{"SWAPDB", "0", "1"}, ""},
	} {
		w.do("SELECT", "0")
		w.do("FLUSHALL")
		tr.do("PING") // the FLUSHALL's null invalidation, if any
		w.do("SET", "k", "v")
		tr.do("SET", "marker", "1")
		tr.do("CLIENT", "CACHING", "YES")
		tr.do("GET", "k")
		w.do("SELECT", "1")
		w.do("SET", "src", "v")
		if ev.cmd[0] == "MOVE" {
			w.do("SELECT", "0")
			w.do("DEL", "k") // invalidated: GET it again
			tr.do("CLIENT", "CACHING", "YES")
			tr.do("GET", "k")
			w.do("SELECT", "1")
			w.do("RENAME", "src", "k")
			tr.do("CLIENT", "CACHING", "YES")
			tr.do("GET", "k")
			ev.cmd = []string{"MOVE", "k", "0"}
		} else if ev.cmd[0] != "COPY" || len(ev.cmd) == 4 {
			w.do("SELECT", "0")
			w.do("SET", "src", "v")
		}
		w.do(ev.cmd...)
		mark, got := tr.do("SET", "marker", "2", "GET")
		if want := []string{ev.want}; ev.want == "" && len(got) != 0 || ev.want != "" && !slices.Equal(got, want) {
			t.Errorf("Redis pushed %q to an OPTIN client that read k, on %v; want %q", got, ev.cmd, want)
		}
		if ev.cmd[0] == "SWAPDB" && mark != nil {
			t.Errorf("after SWAPDB, Redis's SET marker 2 GET returned %v, want nil: the marker moved with the database", mark)
		}
	}
}

// handshake sets a connection up as the tracker needs it, as Redis
// reports it (CLIENT INFO): RESP3, its name, the client's database,
// tracking on, opt-in, and its marker set; and a refusal (a wrong
// password) is an error naming the command Redis refused.
func TestHandshake(t *testing.T) {
	srv := redistest.SharedServer(t)
	tr := &tracker{user: func() (string, string) { return "", "" }, db: 3, marker: "handshake-test-marker"}
	conn, err := net.Dial(srv.Network(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := &rawConn{t: t, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
	if err := tr.handshake(conn, c.r); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	info, _ := c.do("CLIENT", "INFO")
	for _, want := range []string{"name=floodgate-tracking ", "db=3 ", "resp=3", "flags=t"} {
		if !strings.Contains(info.(string), want) {
			t.Errorf("after the handshake, CLIENT INFO says %q, want %q in it", info, want)
		}
	}
	if v, _ := c.do("GET", tr.marker); v != "1" {
		t.Errorf("the marker holds %v after the handshake, want 1", v)
	}

	tr.user = func() (string, string) { return "nobody", "wrong" }
	conn2, err := net.Dial(srv.Network(), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	err = tr.handshake(conn2, bufio.NewReader(conn2))
	if err == nil || !strings.Contains(err.Error(), "HELLO 3: WRONGPASS") {
		t.Errorf("a handshake with a wrong password: %v, want Redis's refusal of HELLO 3", err)
	}
}
