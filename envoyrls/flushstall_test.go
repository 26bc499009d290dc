package envoyrls

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
)

// TestLocalAnswersFlushStalledStore: a flush to a stalled Redis (stopped
// with SIGSTOP) holds back the requests to the store for one batch at
// most, not for every batch of the flush, and stops at the first batch
// that fails; the hits it could not write are kept, and once Redis is
// back a flush writes them all, exactly. Each store call gives up after
// timeout; the flush has nine batches, so a request that waited for the
// whole flush would take ten timeouts, and one that waits for a batch
// about two.
func TestLocalAnswersFlushStalledStore(t *testing.T) {
	const timeout = 300 * time.Millisecond
	const keys = 8*flushBatch + 1
	ctx := context.Background()
	srv := redistest.NewServer(t)
	st, err := redisstore.New(srv.Client(t), redisstore.WithCallerTime(), redisstore.WithCounters(true), redisstore.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	s := NewService(mustParse(t, "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"),
		st, WithClock(clk), WithFlushInterval(time.Minute))
	for range 3 { // a hit under the limit, one over (known over), one from memory
		for i := 0; i < keys; i += 100 {
			req := request("d")
			for k := i; k < min(i+100, keys); k++ {
				req.Descriptors = append(req.Descriptors, descriptor("user", fmt.Sprint("u", k)))
			}
			call(t, s, req)
		}
	}
	if got := s.localAnswers(); got != keys {
		t.Fatalf("%d hits answered from memory, want %d", got, keys)
	}

	srv.Pause()
	flushed := make(chan error, 1)
	flushStart := time.Now()
	go func() { flushed <- s.Flush(ctx) }()
	for s.local.writing.TryRLock() { // until the flush holds back the store's requests
		s.local.writing.RUnlock()
		time.Sleep(time.Millisecond) // the flush's goroutine is real
	}
	start := time.Now()
	_, rerr := s.ShouldRateLimit(ctx, request("d", descriptor("user", "fresh")))
	took := time.Since(start)
	ferr := <-flushed
	flushTook := time.Since(flushStart)
	srv.Resume()
	t.Logf("during the flush, a request to the stalled store took %v (%v); the flush failed in %v: %v", took, rerr, flushTook, ferr)
	if took > 5*timeout {
		t.Errorf("a request to the store during a flush to a stalled store took %v, more than the flush's batch and its own call (%v each)", took, timeout)
	}
	if ferr == nil || flushTook > 5*timeout {
		t.Errorf("the flush to a stalled store: %v after %v, want an error after its first batch (%v)", ferr, flushTook, timeout)
	}

	if err := s.Flush(ctx); err != nil {
		t.Fatalf("the flush once Redis is back: %v", err)
	}
	// The batch written when Redis stalled has an unknown outcome: go-redis
	// gave up on it, and Redis carried it out once resumed. Every other
	// counter holds its hits exactly: 3, and the one here.
	rs := NewService(mustParse(t, "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 1000}\n"),
		st, WithClock(clk), WithFlushInterval(-1))
	twice := 0
	for i := 0; i < keys; i += 100 {
		req := request("d")
		for k := i; k < min(i+100, keys); k++ {
			req.Descriptors = append(req.Descriptors, descriptor("user", fmt.Sprint("u", k)))
		}
		resp, err := rs.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for j, st := range resp.Statuses {
			switch st.LimitRemaining {
			case 996:
			case 995:
				twice++
			default:
				t.Fatalf("user u%d's count after the flushes: %d remaining, want 996 (or 995 in the batch in flight)", i+j, st.LimitRemaining)
			}
		}
	}
	t.Logf("%d counters hold the flush's hits twice", twice)
	if twice > flushBatch {
		t.Errorf("%d counters hold the flush's hits twice, more than the batch in flight when Redis stalled (%d)", twice, flushBatch)
	}
}
