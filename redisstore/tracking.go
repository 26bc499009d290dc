package redisstore

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tracking connection's timing: a PING every heartbeat, answered
// within deadTimeout or the connection is taken for dead; the cache
// serves only while a PONG answered a PING sent within liveHorizon (see
// the package documentation, "Cached denials"). A connection that ends
// is dialled again after redialWait, doubled after each one in a row
// that never went live (a server down, or refusing to track: an ACL, no
// RESP3), up to maxRedialWait.
const (
	heartbeat     = 100 * time.Millisecond
	liveHorizon   = 500 * time.Millisecond
	deadTimeout   = time.Second
	redialWait    = 100 * time.Millisecond
	maxRedialWait = 5 * time.Second
	// markerTTL is how long a tracker's marker outlives its last ping.
	markerTTL = 10 * time.Second
)

// A tracker holds the deny cache's connection to one Redis server (on a
// Cluster, one master). The cache's fills read keys on it, each read
// tracked (CLIENT TRACKING ON OPTIN, then CLIENT CACHING YES before the
// read), so the server sends it an invalidation (a RESP3 push) when
// anyone next writes a key it read, and of no other key; the tracker
// applies them to the cache. Any break in that stream (a connection
// lost, a heartbeat unanswered) drops the entries the tracker vouches
// for (e.tr), and it vouches for none until a new connection has been
// set up and has answered a heartbeat.
type tracker struct {
	c      *denyCache
	client *redis.Client // the server's client in go-redis's layout
	// liveUntil is the instant (ns since c.base) until which the
	// tracker's entries may be served.
	liveUntil atomic.Int64
	dial      func(ctx context.Context) (net.Conn, error)
	user      func() (string, string)
	db        int
	// marker, off a Cluster, is the Redis key that each session sets in
	// its database, and each ping sets anew, to a value it never held: a
	// ping or a fill that finds another value finds the database
	// replaced (SWAPDB).
	marker string
	stop   context.CancelFunc
	done   chan struct{}
	// err is why the last connection ended or was refused.
	err atomic.Pointer[error]
	// off is whether the store's log was told that the tracker went off,
	// and not yet that it came back.
	off atomic.Bool

	mu      sync.Mutex
	markSeq uint64 // the marker's value last set
	conn    net.Conn
	w       *bufio.Writer
	waiters []*request // requests awaiting replies on conn, in order
}

// A request is commands sent on a tracker's connection, awaiting their
// replies: done is closed once replies holds one a command (an error
// reply as a replyError), or err says why none will come.
type request struct {
	n       int
	replies []any
	mark    string // the marker's value that the last command checks, if any
	err     error
	done    chan struct{}
}

// newTracker returns a tracker of c on rc's server, not yet started:
// the caller publishes it (c.tr, c.trackers) and then calls start, so
// that its goroutine never sees the cache without it.
func newTracker(c *denyCache, rc *redis.Client) *tracker {
	o := rc.Options()
	t := &tracker{c: c, client: rc, db: o.DB, done: make(chan struct{})}
	if !c.s.cluster {
		t.marker = c.s.cfg.prefix + "tracking:" + rand.Text()
	}
	t.dial = func(ctx context.Context) (net.Conn, error) { return o.Dialer(ctx, o.Network, o.Addr) }
	t.user = func() (string, string) {
		if o.CredentialsProvider != nil {
			return o.CredentialsProvider()
		}
		return o.Username, o.Password
	}
	return t
}

// start starts the tracker's connection.
func (t *tracker) start() {
	ctx, cancel := context.WithCancel(context.Background())
	t.stop = cancel
	go t.run(ctx)
}

// isLive reports whether the tracker's entries may be served at now, an
// instant of the monotonic clock (ns since c.base).
func (t *tracker) isLive(now int64) bool { return now < t.liveUntil.Load() }

// live marks the tracker live until at, an instant on the monotonic clock.
func (t *tracker) live(at time.Time) {
	if t.off.Load() && t.off.Swap(false) {
		t.log(slog.LevelInfo, "redisstore: the deny cache is back on")
	}
	until := int64(at.Sub(t.c.base))
	for {
		old := t.liveUntil.Load()
		if until <= old || t.liveUntil.CompareAndSwap(old, until) {
			return
		}
	}
}

// wentOff logs, unless it is logged already, that the tracker is off
// because of err.
func (t *tracker) wentOff(err error) {
	if !t.off.Swap(true) {
		t.log(slog.LevelWarn, "redisstore: the deny cache is off: decisions go to Redis", "reason", err.Error())
	}
}

// log writes a record of the tracker to the store's logger, if any.
func (t *tracker) log(level slog.Level, msg string, attrs ...any) {
	if l := t.c.s.cfg.logger; l != nil {
		l.Log(context.Background(), level, msg, append(attrs, "server", t.client.Options().Addr)...)
	}
}

// close stops the tracker and waits for it.
func (t *tracker) close() {
	t.stop()
	<-t.done
}

// run keeps a tracking connection up until ctx ends, redialling after
// each one ends (see redialWait).
func (t *tracker) run(ctx context.Context) {
	defer close(t.done)
	wait := redialWait
	for ctx.Err() == nil {
		before := t.liveUntil.Load()
		err := t.session(ctx)
		wentLive := t.liveUntil.Load() != before // the server tracked
		t.c.flush(t, false)
		if ctx.Err() != nil {
			return
		}
		t.err.Store(&err)
		t.wentOff(err)
		if wentLive {
			wait = redialWait
		}
		select {
		case <-ctx.Done():
		case <-t.c.redialAfter(wait):
		}
		wait = min(2*wait, maxRedialWait)
	}
}

// session dials a connection, turns tracking on, and applies its
// invalidations until it breaks or ctx ends.
func (t *tracker) session(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, deadTimeout)
	conn, err := t.dial(dctx)
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	if err := t.handshake(conn, r); err != nil {
		return err
	}
	t.mu.Lock()
	t.conn, t.w, t.waiters = conn, bufio.NewWriter(conn), nil
	t.mu.Unlock()
	beat := make(chan error, 1)
	go func() { beat <- t.beat(ctx, conn) }()
	err = t.read(r)
	conn.Close()
	t.mu.Lock()
	for _, w := range t.waiters {
		w.err = errLost
		close(w.done)
	}
	t.conn, t.w, t.waiters = nil, nil, nil
	t.mu.Unlock()
	<-beat
	return err
}

var errLost = errors.New("the tracking connection was lost")

// handshake sets up conn: RESP3 (HELLO 3, with AUTH when the client has
// credentials), a name, the client's database, then tracking of the keys
// that the connection reads after CLIENT CACHING YES (invariant 1).
func (t *tracker) handshake(conn net.Conn, r *bufio.Reader) error {
	_ = conn.SetDeadline(time.Now().Add(deadTimeout))
	defer func() { _ = conn.SetDeadline(time.Time{}) }()
	hello := []string{"HELLO", "3"}
	if user, pass := t.user(); pass != "" {
		hello = append(hello, "AUTH", cmpOr(user, "default"), pass)
	}
	w := bufio.NewWriter(conn)
	cmds := [][]string{hello, {"CLIENT", "SETNAME", "floodgate-tracking"}}
	if t.db != 0 {
		cmds = append(cmds, []string{"SELECT", strconv.Itoa(t.db)})
	}
	cmds = append(cmds, []string{"CLIENT", "TRACKING", "ON", "OPTIN"})
	if t.marker != "" {
		t.mu.Lock()
		set := t.setMark()
		t.mu.Unlock()
		cmds = append(cmds, set)
	}
	for _, cmd := range cmds {
		writeCommand(w, cmd...)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, cmd := range cmds {
		v, push, err := readValue(r)
		switch e, refused := v.(replyError); {
		case err != nil:
			return fmt.Errorf("setting up tracking: %w", err)
		case push != nil:
			return errors.New("setting up tracking: a push before tracking was on")
		case refused:
			// Without tracking no invalidation would come: the cache
			// must not serve on this connection.
			return fmt.Errorf("setting up tracking: %s %s: %w", cmd[0], cmd[1], e)
		}
	}
	return nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// beat sends a PING every heartbeat and marks the cache live until
// liveHorizon after the PING's sending once it is answered; a PING
// unanswered within deadTimeout closes conn.
func (t *tracker) beat(ctx context.Context, conn net.Conn) error {
	for {
		sent := time.Now()
		ping, err := t.ping()
		if err != nil {
			return err
		}
		select {
		case <-ping.done:
			if err := t.pong(ping); err != nil {
				return err
			}
			t.live(sent.Add(liveHorizon))
		case <-time.After(deadTimeout):
			t.c.flush(t, false)
			conn.Close()
			return errors.New("a heartbeat went unanswered")
		case <-ctx.Done():
			conn.Close()
			return ctx.Err()
		}
		select {
		case <-time.After(heartbeat - time.Since(sent)):
		case <-ctx.Done():
			conn.Close()
			return ctx.Err()
		}
	}
}

// send sends cmds on the connection, one after the other with no other
// command between them, and, off a Cluster, a check of the marker: with
// renew a SET of a new value that returns the old, else a GET (see
// request.marked). It returns their request. Replies and pushes come in
// the order Redis sends them: a PING's answer comes after every
// invalidation of a write that Redis carried out before the PING.
func (t *tracker) send(renew bool, cmds ...[]string) (*request, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conn == nil {
		return nil, errLost
	}
	mark := ""
	if t.marker != "" {
		mark = strconv.FormatUint(t.markSeq, 10)
		check := []string{"GET", t.marker}
		if renew {
			check = append(t.setMark(), "GET")
		}
		cmds = append(cmds, check)
	}
	for _, cmd := range cmds {
		writeCommand(t.w, cmd...)
	}
	if err := t.w.Flush(); err != nil {
		return nil, err
	}
	cl := &request{n: len(cmds), replies: make([]any, 0, len(cmds)), mark: mark, done: make(chan struct{})}
	t.waiters = append(t.waiters, cl)
	return cl, nil
}

// failed returns, once cl is done, why it failed: its connection's loss
// or its first error reply.
func (cl *request) failed() error {
	if cl.err != nil {
		return cl.err
	}
	for _, v := range cl.replies {
		if e, ok := v.(replyError); ok {
			return e
		}
	}
	return nil
}

// setMark returns a command that sets the tracker's marker to a value
// it never held, for markerTTL; t.mu is held.
func (t *tracker) setMark() []string {
	t.markSeq++
	v := strconv.FormatUint(t.markSeq, 10)
	return []string{"SET", t.marker, v, "PX", strconv.FormatInt(markerTTL.Milliseconds(), 10)}
}

// ping sends a PING, and, off a Cluster, a renewal of the marker that
// reads its value before.
func (t *tracker) ping() (*request, error) {
	return t.send(true, []string{"PING"})
}

// pong returns, once ping is done, why it failed. A marker that does not
// hold the value the tracker last set means that the database's contents
// were replaced (SWAPDB, which Redis 7 tracking does not invalidate:
// TestRedisSwapDBTracking): the tracker's entries go, and the marker, set
// anew, tells of the next replacement.
func (t *tracker) pong(ping *request) error {
	if err := ping.failed(); err != nil {
		return err
	}
	if _, ok := ping.marked(); !ok {
		t.c.flush(t, true)
	}
	return nil
}

// marked returns, once cl is done and did not fail, its replies but
// the marker's check, if it has one, and whether the marker held the
// value last set: when not, its reads came from a database that has
// since replaced the tracker's, or that it replaced (SWAPDB).
func (cl *request) marked() ([]any, bool) {
	if cl.mark == "" {
		return cl.replies, true
	}
	last := len(cl.replies) - 1
	return cl.replies[:last], cl.replies[last] == cl.mark
}

// sync waits until every invalidation of a write that Redis carried out
// before the call has been applied: a PING's answer comes after them.
func (t *tracker) sync(ctx context.Context) error {
	sent := time.Now()
	ping, err := t.ping()
	if err != nil {
		return err
	}
	select {
	case <-ping.done:
		err := t.pong(ping)
		if err == nil {
			t.live(sent.Add(liveHorizon))
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// read applies the connection's pushes and hands its replies to their
// waiters, until it breaks.
func (t *tracker) read(r *bufio.Reader) error {
	for {
		v, push, err := readValue(r)
		if err != nil {
			return err
		}
		if push == nil {
			t.reply(v)
			continue
		}
		if len(push) == 2 && push[0] == "invalidate" {
			keys, ok := push[1].([]any)
			if !ok { // a null: FLUSHALL, FLUSHDB
				t.c.flush(t, true)
				continue
			}
			t.c.invalidate(keys)
		}
	}
}

// reply hands v, a reply, to the call awaiting it.
func (t *tracker) reply(v any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.waiters) == 0 {
		return
	}
	w := t.waiters[0]
	if w.replies = append(w.replies, v); len(w.replies) == w.n {
		t.waiters = t.waiters[1:]
		close(w.done)
	}
}
