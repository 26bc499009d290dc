package grpclimit

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// TestShapeStreams: the stream interceptor shapes as the unary one does.
// Over a real gRPC server on loopback and a fake clock, with WithDelay, a
// stream over the rate opens at its exact turn; one whose client gives up
// while it waits gives its units back (the next stream opens at 2s, one
// slot earlier than 3s) and is counted as abandoned; one whose turn is
// past the maximum delay is refused at once with the very status, details
// and trailer a unary call gets in the same state; and no goroutine stays
// behind.
func TestShapeStreams(t *testing.T) {
	fc := clock.NewFake(t0)
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1/1s"), floodgate.WithClock(fc), floodgate.WithName("streams")))
	i := New(l, WithDelay(2*time.Second), WithQuotaFailure())
	c, seen := start(t, i)
	if err := <-openStream(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine() // the connection up, nothing waiting

	// At 0 the bucket is held till 1s: the second stream waits 1s exactly.
	second := openStream(context.Background(), c)
	waiting(t, fc, 1)
	fc.Advance(time.Second - time.Nanosecond)
	if fc.Timers() != 1 {
		t.Fatal("the second stream opened before its turn")
	}
	fc.Advance(time.Nanosecond)
	if err := <-second; err != nil {
		t.Fatalf("the stream that waited 1s: %v", err)
	}

	// At 1s the third would open at 2s; its client gives up, and its turn
	// is reused by the fourth.
	gone, cancel := context.WithCancel(context.Background())
	third := openStream(gone, c)
	waiting(t, fc, 1)
	cancel()
	if err := <-third; status.Code(err) != codes.Canceled {
		t.Fatalf("the cancelled stream: %v", err)
	}
	waitFor(t, "the server to see the cancellation", func() bool { return i.Stats().Abandoned == 1 && fc.Timers() == 0 })
	fourth := openStream(context.Background(), c)
	waiting(t, fc, 1)
	fc.Advance(time.Second - time.Nanosecond)
	if fc.Timers() != 1 {
		t.Fatal("the fourth stream opened before its turn")
	}
	fc.Advance(time.Nanosecond)
	if err := <-fourth; err != nil {
		t.Fatalf("the fourth stream, at 2s, the turn the third gave back: %v", err)
	}

	// At 2s the bucket is held till 3s: a stream waits 1s, the next 2s,
	// and the one after would wait 3s, past the maximum of 2s.
	fifth := openStream(context.Background(), c)
	waiting(t, fc, 1)
	sixth := openStream(context.Background(), c)
	waiting(t, fc, 2)
	streamTrailer, streamErr := refusedStream(t, c)
	unaryTrailer, unaryErr := refusedUnary(t, c)
	sst, ust := status.Convert(streamErr), status.Convert(unaryErr)
	if sst.Code() != codes.ResourceExhausted || retryDelay(streamErr) != time.Second {
		t.Fatalf("a stream 3s from its turn, with a maximum of 2s: %v, retry in %v; want ResourceExhausted, retry in 1s", streamErr, retryDelay(streamErr))
	}
	if !proto.Equal(sst.Proto(), ust.Proto()) {
		t.Errorf("refused stream's status %v, a unary call's %v", sst.Proto(), ust.Proto())
	}
	if got, want := streamTrailer.Get("grpc-status-details-bin"), unaryTrailer.Get("grpc-status-details-bin"); len(got) != 1 || len(want) != 1 || got[0] != want[0] {
		t.Errorf("refused stream's status details trailer %q, a unary call's %q", got, want)
	}
	fc.Advance(2 * time.Second)
	for _, done := range []chan error{fifth, sixth} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	if got, want := seen.String(), "true/true/0 true/true/0 true/true/0 true/true/0 true/true/0"; got != want {
		t.Fatalf("decisions seen by the handlers: %s, want %s", got, want)
	}
	if st := i.Stats(); st.Abandoned != 1 || st.Denied != 2 || st.Errors != 0 {
		t.Fatalf("stats %+v, want 1 abandoned, 2 denied (the stream and the unary call)", st)
	}
	waitFor(t, "the streams' goroutines to end", func() bool { return runtime.NumGoroutine() <= before+2 })
	t.Logf("goroutines: %d before, %d after", before, runtime.NumGoroutine())
}

// openStream opens a Watch stream with ctx in a goroutine and sends on
// the channel returned the error of reading its first message: nil once
// the interceptor admitted it and the handler answered.
func openStream(ctx context.Context, c healthpb.HealthClient) chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel() // ends the stream once read
		st, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = st.Recv()
		}
		done <- err
	}()
	return done
}

// refusedStream opens a Watch stream that the interceptor refuses and
// returns its trailer and error.
func refusedStream(t *testing.T, c healthpb.HealthClient) (metadata.MD, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // real time: a refusal is at once
	defer cancel()
	st, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return nil, err
	}
	_, err = st.Recv()
	return st.Trailer(), err
}

// refusedUnary makes a Check call that the interceptor refuses and
// returns its trailer and error.
func refusedUnary(t *testing.T, c healthpb.HealthClient) (metadata.MD, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var tr metadata.MD
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.Trailer(&tr))
	return tr, err
}

// waitFor polls cond, in real time, for what the server does on its own
// goroutines (a cancellation reaching it, streams closing), failing after
// 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// waiting waits until n streams sleep on fc, failing after 5 s of real
// time: a stream that does not wait its turn fails the test, never hangs
// it.
func waiting(t *testing.T, fc *clock.Fake, n int) {
	t.Helper()
	waitFor(t, "streams to wait their turn", func() bool { return fc.Timers() >= n })
}
