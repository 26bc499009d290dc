package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// Calls that arrive while maxInFlight scripts are out leave together, in
// one script call, and each is decided as if alone: while Redis is paused,
// two calls go out and hang, 100 more queue; when Redis resumes they take
// one script call, and exactly LIMIT of the 102 are admitted.
func TestCallsWaitingLeaveInOneScript(t *testing.T) {
	ctx := context.Background()
	c, control := pausable(t)
	s, err := New(c, WithCallerTime(), WithMaxInFlight(2), WithMaxBatch(128), WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := s.Table("x", algo.MustParsePolicy("sliding-log 40/1h"))
	if _, err := tb.Decide(ctx, "warm", 1e9, 1); err != nil { // loads the script
		t.Fatal(err)
	}
	c.ConfigResetStat(ctx)
	if err := c.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	admitted := make(chan bool, 102)
	decide := func() {
		defer wg.Done()
		d, err := tb.Decide(ctx, "hot", 2e9, 1)
		if err != nil {
			t.Error(err)
		}
		admitted <- d.Allowed
	}
	// Both out, one after the other: each caller's sender has taken its
	// call (none is pending), so that the first does not take both, and
	// the calls below cannot join either's script call. Senders alone
	// counts a sender from the moment it starts, while it may still
	// gather the calls about to arrive: on a busy machine it took the 100
	// below and the test waited for them in vain.
	for i := range 2 {
		wg.Add(1)
		go decide()
		waitFor(t, func() bool { return s.batcher.Senders() == i+1 && s.batcher.Pending() == 0 })
	}
	wg.Add(100)
	for range 100 {
		go decide()
	}
	waitFor(t, func() bool { return s.batcher.Pending() == 100 })
	// Resume from another connection: a paused Redis still reads commands
	// that write nothing.
	if err := control.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(admitted)
	n := 0
	for a := range admitted {
		if a {
			n++
		}
	}
	if n != 40 {
		t.Errorf("%d of 102 admitted, want 40", n)
	}
	if calls := scriptCalls(t, c); calls != 3 {
		t.Errorf("%d script calls for 102 decisions (2 out, 100 waiting), want 3", calls)
	}
}

// pausable starts a Redis and returns a client whose calls may wait while
// Redis is paused (longer than go-redis's default read timeout), and a
// control client, connected before any pause, to resume it: a paused
// Redis still reads commands that write nothing.
func pausable(t *testing.T) (c, control *redis.Client) {
	srv := redistest.NewServer(t)
	c = redis.NewClient(&redis.Options{Network: srv.Network(), Addr: srv.Addr(), ReadTimeout: time.Minute, PoolSize: 8})
	control = redis.NewClient(&redis.Options{Network: srv.Network(), Addr: srv.Addr(), PoolSize: 1})
	t.Cleanup(func() { c.Close(); control.Close() })
	if err := control.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	return c, control
}

// waitFor polls cond, which other goroutines make true, for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// scriptCalls returns the FCALL, EVALSHA and EVAL calls Redis counted.
func scriptCalls(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(info, "\n") {
		var n int
		for _, cmd := range []string{"fcall", "evalsha", "eval"} {
			if _, err := fmt.Sscanf(line, "cmdstat_"+cmd+":calls=%d", &n); err == nil {
				total += n
			}
		}
	}
	return total
}

// A reply that is not what the script writes is an ErrCorrupt naming the
// problem, for every op of the calls, and sets no op.
func TestCorruptReply(t *testing.T) {
	s := &Store{}
	tb := &table{policy: algo.MustParsePolicy("token-bucket 10/1s")}
	doubles := func(vs ...float64) string {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return string(b)
	}
	good := doubles(1, 2, 1, 5, 0, 100, 0, 0, 0)
	for _, tc := range []struct {
		name  string
		reply any
		want  string
	}{
		{"a table", []any{int64(1)}, "a reply of 0 bytes where 9 values belong"},
		{"short", good[:70], "a reply of 70 bytes where 9 values belong"},
		{"a fraction", doubles(1, 2, 1, 5.5, 0, 100, 0, 0, 0), "5.5 where an integer belongs"},
		{"past 2^53", doubles(1, 2, 1, 1<<54, 0, 100, 0, 0, 0), "where an integer belongs"},
		{"a bad big", doubles(1, 2, 1, 5, 0, -2, 0, 0, 0) + "12x", "a duration past 2^53"},
		{"a missing big", doubles(1, 2, 1, 5, 0, -2, 0, 0, 0), "a duration past 2^53"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &call{Work: work{ops: []store.Op{{Kind: store.OpDecide, Table: tb, Key: "k", N: 1}}}}
			op := &c.Work.ops[0]
			s.decode([]*call{c}, tc.reply, nil)
			if !errors.Is(c.Err, ErrCorrupt) || !strings.Contains(c.Err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrCorrupt saying %q", c.Err, tc.want)
			}
			if op.Result.Decision.Allowed || op.Result.Decision.Remaining != 0 {
				t.Errorf("op set from a corrupt reply: %+v", op.Result.Decision)
			}
		})
	}
	// The same shapes, well formed: a duration past 2^53 comes from the
	// decimals after the doubles.
	c := &call{Work: work{ops: []store.Op{{Kind: store.OpDecide, Table: tb, Key: "k", N: 1}}}}
	op := &c.Work.ops[0]
	s.decode([]*call{c}, doubles(1, 2, 1, 5, -1, -2, 0, 0, 0)+"9007199254740993", nil)
	if c.Err != nil {
		t.Fatal(c.Err)
	}
	if d := op.Result.Decision; !d.Allowed || d.Remaining != 5 || d.RetryAfter != algo.Never || d.ResetAfter != 9007199254740993 {
		t.Errorf("decision %+v", d)
	}
}

// FuzzReply: any reply, however malformed, is decoded without a panic,
// and is either an error for every op or sets each op.
func FuzzReply(f *testing.F) {
	tb := &table{policy: algo.MustParsePolicy("token-bucket 10/1s")}
	doubles := func(vs ...float64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	f.Add(doubles(1, 2, 1, 5, 0, 100, 0, 0, 0), uint8(1))
	f.Add(append(doubles(1, 2, 1, 5, -1, -2, 0, 0, 0), "9007199254740993"...), uint8(1))
	f.Add(doubles(1, 2, 1, 5, 0, 100, 0, 0, 0, 0, 3, 0, -1, 7, 0, 0, 0), uint8(2))
	f.Fuzz(func(t *testing.T, reply []byte, nops uint8) {
		s := &Store{}
		var calls []*call
		for range nops % 4 {
			calls = append(calls, &call{Work: work{ops: []store.Op{{Kind: store.OpDecide, Table: tb, Key: "k", N: 1}}}})
		}
		s.decode(calls, string(reply), nil)
		for _, c := range calls {
			if c.Err != nil && !errors.Is(c.Err, ErrCorrupt) {
				t.Fatalf("an error that is not ErrCorrupt: %v", c.Err)
			}
		}
	})
}

// A caller whose context ends while its call is out returns at once with
// the context's error, and the call goes on without it: it takes effect.
// A caller whose deadline passes while its call waits to go out returns
// at once too, however long Redis stalls, and its call does nothing.
func TestCallersLeave(t *testing.T) {
	ctx := context.Background()
	c, control := pausable(t)
	s, err := New(c, WithCallerTime(), WithMaxInFlight(2), WithTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := s.Table("x", algo.MustParsePolicy("fixed-window 5/1h"))
	if _, err := tb.Decide(ctx, "warm", 1e9, 1); err != nil { // loads the script
		t.Fatal(err)
	}
	if err := c.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	decide := func(ctx context.Context) <-chan error {
		done := make(chan error, 1)
		go func() { _, err := tb.Decide(ctx, "k", 2e9, 1); done <- err }()
		return done
	}
	// A sender takes the first and sends it, another the second: two
	// script calls out, on two connections.
	first := decide(ctx)
	waitFor(t, func() bool { return s.batcher.Senders() == 1 && s.batcher.Pending() == 0 })
	leaving, leave := context.WithCancel(ctx)
	second := decide(leaving)
	waitFor(t, func() bool { st := c.PoolStats(); return st.TotalConns-st.IdleConns == 2 })
	// The third waits to go out, and leaves at its deadline.
	short, cancel := context.WithTimeout(ctx, time.Millisecond)
	defer cancel()
	if err := <-decide(short); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the caller whose deadline passed: %v, want ErrUnavailable and context.DeadlineExceeded", err)
	}
	if n := s.batcher.Pending(); n != 0 {
		t.Fatalf("%d calls waiting after the only one waiting left", n)
	}
	leave()
	if err := <-second; !errors.Is(err, context.Canceled) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("the caller that left: %v, want context.Canceled alone", err)
	}
	if err := control.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.batcher.Senders() == 0 })
	// The first two took effect, the second's caller gone; the third did
	// nothing.
	if d, err := tb.Decide(ctx, "k", 2e9, 0); err != nil || d.Remaining != 3 {
		t.Fatalf("after the three: %+v %v, want 3 remaining", d, err)
	}
}
