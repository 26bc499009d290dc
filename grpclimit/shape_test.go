package grpclimit

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// TestShapeCalls: with WithDelay, over a real gRPC server on loopback and
// a fake clock, a call over the rate waits its exact turn; one cancelled
// while it waits gives its turn back (the next call goes at 2s, not 3s);
// one whose turn is past the maximum delay fails at once with a RetryInfo
// saying when a retry would fit; and no goroutine stays behind.
func TestShapeCalls(t *testing.T) {
	fc := clock.NewFake(t0)
	l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("token-bucket 1/1s"), floodgate.WithClock(fc)))
	i := New(l, WithDelay(2*time.Second))
	c, seen := start(t, i)
	call := func(ctx context.Context) chan error {
		done := make(chan error, 1)
		go func() { done <- checkCtx(ctx, c) }()
		return done
	}
	if err := <-call(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine() // the connection up, nothing waiting
	second := call(context.Background())
	fc.WaitTimers(1)
	fc.Advance(time.Second)
	if err := <-second; err != nil {
		t.Fatalf("the call that waited 1s: %v", err)
	}
	// The third waits for 2s; its client gives up, and its turn is reused.
	gone, cancel := context.WithCancel(context.Background())
	third := call(gone)
	fc.WaitTimers(1)
	cancel()
	if err := <-third; status.Code(err) != codes.Canceled {
		t.Fatalf("the cancelled call: %v", err)
	}
	for i.Stats().Abandoned != 1 || fc.Timers() != 0 {
		runtime.Gosched() // the server sees the cancellation
	}
	fourth := call(context.Background())
	fc.WaitTimers(1)
	fc.Advance(time.Second - time.Nanosecond)
	if fc.Timers() != 1 {
		t.Fatal("the fourth call went before its turn")
	}
	fc.Advance(time.Nanosecond)
	if err := <-fourth; err != nil {
		t.Fatalf("the fourth call, at 2s, the turn the third gave back: %v", err)
	}
	// At 2s the bucket is held till 3s: a call waits 1s, the next 2s, and
	// the one after would wait 3s, past the maximum of 2s: refused, retry
	// in 1s.
	fifth, sixth := call(context.Background()), (chan error)(nil)
	fc.WaitTimers(1)
	sixth = call(context.Background())
	fc.WaitTimers(2)
	err := checkCtx(context.Background(), c)
	st := status.Convert(err)
	var retry time.Duration
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri.RetryDelay.AsDuration()
		}
	}
	if st.Code() != codes.ResourceExhausted || retry != time.Second {
		t.Fatalf("a call 3s from its turn, with a maximum of 2s: %v, retry in %v; want ResourceExhausted, retry in 1s", err, retry)
	}
	fc.Advance(2 * time.Second)
	for _, done := range []chan error{fifth, sixth} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got, want := seen.String(), "true/true/0 true/true/0 true/true/0 true/true/0 true/true/0"; got != want {
		t.Fatalf("decisions seen by the handler: %s, want %s", got, want)
	}
	if st := i.Stats(); st.Abandoned != 1 || st.Denied != 1 || st.Errors != 0 {
		t.Fatalf("stats %+v", st)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond) // real streams closing
	}
	t.Logf("goroutines: %d before, %d after", before, runtime.NumGoroutine())
}

// checkCtx calls Check with ctx.
func checkCtx(ctx context.Context, c healthpb.HealthClient) error {
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// TestShapeNewAllRefusesDelay: NewAll cannot wait all or nothing; it says
// so when it is made.
func TestShapeNewAllRefusesDelay(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("NewAll with WithDelay did not panic")
		}
	}()
	NewAll([]Limit{{Limiter: newLimiter(t, "token-bucket 1/1s")}}, WithDelay(time.Second))
}
