package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/memstore"
)

// Five checks at one instant with MaxWait 3s on a bucket of 1 a second,
// over a real HTTP server: admitted after 0, 1, 2 and 3s exactly, the
// fifth refused with RetryAfter 4s; without MaxWait, today's answer.
func TestDecideMaxWait(t *testing.T) {
	url, _ := newServer(t, memstore.New(0))
	c := newClient(t, url)
	ctx := context.Background()
	ch := client.Check{PolicyText: "token-bucket 1/1s", Key: "alice", MaxWait: 3 * time.Second}
	for i := range 4 {
		d, err := c.Decide(ctx, ch)
		want := client.Decision{Allowed: true, ResetAfter: time.Duration(i+1) * time.Second, Delay: time.Duration(i) * time.Second}
		if err != nil || d != want {
			t.Errorf("check %d: %+v %v, want %+v", i+1, d, err, want)
		}
	}
	if d, err := c.Decide(ctx, ch); err != nil || d != (client.Decision{RetryAfter: 4 * time.Second, ResetAfter: 4 * time.Second}) {
		t.Errorf("fifth: %+v %v, want refused, retry after 4s", d, err)
	}
	ch.MaxWait = 0
	if d, err := c.Decide(ctx, ch); err != nil || d != (client.Decision{RetryAfter: 4 * time.Second, ResetAfter: 4 * time.Second}) {
		t.Errorf("without MaxWait: %+v %v", d, err)
	}
	ch.MaxWait = -time.Second
	if _, err := c.Decide(ctx, ch); !errors.Is(err, client.ErrBadRequest) || !contains(err, "max_wait -1 is negative") {
		t.Errorf("a negative MaxWait: %v", err)
	}
	if _, err := c.CheckAll(ctx, client.Check{Policy: "global", Key: "k", MaxWait: time.Second}); !errors.Is(err, client.ErrBadRequest) || !contains(err, "max_wait goes with one check") {
		t.Errorf("MaxWait in a batch: %v", err)
	}
	if err := c.Reset(ctx, client.Check{PolicyText: "token-bucket 1/1s", Key: "alice", MaxWait: time.Second}); err != nil {
		t.Errorf("Reset of a Check with a MaxWait: %v", err)
	}
	if d, _ := c.Decide(ctx, client.Check{PolicyText: "token-bucket 1/1s", Key: "alice"}); !d.Allowed {
		t.Errorf("after the Reset: %+v", d)
	}
}

// Wait sleeps the server's delay on the client's clock, callers in the
// order they asked, and returns the refusal at once when the wait would
// pass MaxWait.
func TestWaitBucket(t *testing.T) {
	url, clk := newServer(t, memstore.New(0))
	c := newClient(t, url, client.WithClock(clk))
	ctx := context.Background()
	ch := client.Check{PolicyText: "token-bucket 1/1s", Key: "bob", MaxWait: 2 * time.Second}
	if d, err := c.Wait(ctx, ch); err != nil || !d.Allowed || d.Delay != 0 {
		t.Fatalf("first: %+v %v", d, err)
	}
	wait := func() chan client.Decision {
		got := make(chan client.Decision, 1)
		go func() {
			d, err := c.Wait(ctx, ch)
			if err != nil {
				t.Error(err)
			}
			got <- d
		}()
		return got
	}
	second := wait()
	clk.WaitTimers(1) // it sleeps its 1s
	third := wait()
	clk.WaitTimers(2) // and this one 2s
	if d, err := c.Wait(ctx, ch); err != nil || d.Allowed || d.RetryAfter != 3*time.Second {
		t.Errorf("fourth, past MaxWait: %+v %v; want refused at once, retry after 3s", d, err)
	}
	clk.Advance(time.Second)
	if d := <-second; !d.Allowed || d.Delay != time.Second {
		t.Errorf("second: %+v", d)
	}
	if n := clk.Timers(); n != 1 {
		t.Errorf("after 1s, %d sleeping; want the third still", n)
	}
	clk.Advance(time.Second)
	if d := <-third; !d.Allowed || d.Delay != 2*time.Second {
		t.Errorf("third: %+v", d)
	}

	// A cancelled wait returns the context's error.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := c.Wait(cctx, ch); errc <- err }()
	clk.WaitTimers(1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled while sleeping: %v", err)
	}
}

// Under a log policy nothing is held: Wait sleeps each refusal's
// RetryAfter and asks again while that fits in MaxWait.
func TestWaitLog(t *testing.T) {
	url, clk := newServer(t, memstore.New(0))
	c := newClient(t, url, client.WithClock(clk))
	ctx := context.Background()
	ch := client.Check{PolicyText: "sliding-log 1/10s", Key: "k", MaxWait: 15 * time.Second}
	c.Wait(ctx, ch)
	short := ch
	short.MaxWait = 5 * time.Second
	if d, err := c.Wait(ctx, short); err != nil || d.Allowed || d.RetryAfter != 10*time.Second {
		t.Errorf("MaxWait 5s: %+v %v; want refused at once", d, err)
	}
	got := make(chan client.Decision, 1)
	go func() { d, _ := c.Wait(ctx, ch); got <- d }()
	clk.WaitTimers(1)
	clk.Advance(10 * time.Second)
	if d := <-got; !d.Allowed || d.Delay != 0 {
		t.Errorf("after sleeping the RetryAfter: %+v", d)
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// A MaxWait longer than the server's limits.max_wait (1m by default):
// the queue full, Wait holds nothing, sleeps the refusal's RetryAfter and
// asks again.
func TestWaitQueueFull(t *testing.T) {
	url, clk := newServer(t, memstore.New(0))
	c := newClient(t, url, client.WithClock(clk))
	ctx := context.Background()
	ch := client.Check{PolicyText: "token-bucket 1/1s", Key: "k", MaxWait: time.Minute}
	for range 61 { // 0 to 60 s: the queue is full
		c.Decide(ctx, ch)
	}
	ch.MaxWait = time.Hour
	got := make(chan client.Decision, 1)
	go func() { d, _ := c.Wait(ctx, ch); got <- d }()
	clk.WaitTimers(1)
	clk.Advance(61 * time.Second) // its RetryAfter
	if d := <-got; !d.Allowed || d.Delay != 0 {
		t.Errorf("after the queue drained: %+v", d)
	}
}
