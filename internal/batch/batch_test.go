package batch

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var ctx = context.Background()

// gated is a store whose sends each wait for the test to let them go: a
// send takes its calls, says which (entered), waits for release, and
// adds 1000 to each call's Work.
type gated struct {
	entered chan []int // the Work of each send's calls, as taken
	release chan struct{}
}

func newGated() *gated {
	return &gated{entered: make(chan []int, 100), release: make(chan struct{})}
}

func (g *gated) send(_ context.Context, calls []*Call[int]) {
	calls = Take(calls)
	var ws []int
	for _, c := range calls {
		ws = append(ws, c.Work)
	}
	g.entered <- ws
	<-g.release
	for _, c := range calls {
		c.Work += 1000
	}
}

// do calls b.Do in a goroutine with a call of work w, and returns the
// channel of its outcome.
func do(b *Batcher[int], ctx context.Context, w int) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		c := &Call[int]{Work: w}
		err := b.Do(ctx, c)
		if err != nil {
			ch <- outcome{err: err} // c is no longer ours
			return
		}
		ch <- outcome{work: c.Work, err: c.Err}
	}()
	return ch
}

type outcome struct {
	work int
	err  error
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

func mustDone(t *testing.T, ch <-chan outcome, want int) {
	t.Helper()
	if o := <-ch; o.err != nil || o.work != want {
		t.Fatalf("got %d, %v; want %d, done", o.work, o.err, want)
	}
}

// A call that finds nothing under way is sent at once, from its caller's
// goroutine, with its caller's context.
func TestLoneCallerSendsItself(t *testing.T) {
	type key struct{}
	callerCtx := context.WithValue(ctx, key{}, "caller")
	var got context.Context
	var senders int
	var b *Batcher[int]
	b = New(func(ctx context.Context, calls []*Call[int]) {
		got, senders = ctx, b.Senders()
		for _, c := range Take(calls) {
			c.Work *= 2
		}
	}, Limits{MaxBatch: 8, MaxInFlight: 2})
	c := &Call[int]{Work: 21}
	if err := b.Do(callerCtx, c); err != nil || c.Work != 42 || c.Err != nil {
		t.Fatalf("Do: %v, work %d, err %v", err, c.Work, c.Err)
	}
	// Written in Do's goroutine, and read here without synchronization:
	// the race detector checks that the send ran on this goroutine.
	if got != callerCtx || senders != 1 {
		t.Fatalf("the send had context %v and %d senders; want the caller's and 1", got, senders)
	}
	if b.Senders() != 0 {
		t.Fatalf("%d senders after the call", b.Senders())
	}
	// The call may go again.
	if err := b.Do(callerCtx, c); err != nil || c.Work != 84 {
		t.Fatalf("Do again: %v, work %d", err, c.Work)
	}
}

// Calls that arrive while a send is under way wait, and go together, up to
// MaxBatch in one send, in the order they came.
func TestCallsWaitingGoTogether(t *testing.T) {
	g := newGated()
	b := New(g.send, Limits{MaxBatch: 3, MaxInFlight: 1})
	first := do(b, ctx, 0)
	if ws := <-g.entered; !slices.Equal(ws, []int{0}) {
		t.Fatalf("the first send: %v", ws)
	}
	var rest []<-chan outcome
	for i := 1; i <= 5; i++ {
		rest = append(rest, do(b, ctx, i))
		waitFor(t, func() bool { return b.Pending() == i })
	}
	g.release <- struct{}{}
	mustDone(t, first, 1000)
	if ws := <-g.entered; !slices.Equal(ws, []int{1, 2, 3}) {
		t.Fatalf("the second send: %v, want [1 2 3]", ws)
	}
	g.release <- struct{}{}
	if ws := <-g.entered; !slices.Equal(ws, []int{4, 5}) {
		t.Fatalf("the third send: %v, want [4 5]", ws)
	}
	g.release <- struct{}{}
	for i, ch := range rest {
		mustDone(t, ch, 1000+i+1)
	}
	waitFor(t, func() bool { return b.Senders() == 0 })
}

// At most MaxInFlight sends are under way at once; the calls beyond wait.
func TestMaxInFlight(t *testing.T) {
	g := newGated()
	b := New(g.send, Limits{MaxBatch: 8, MaxInFlight: 2})
	first := do(b, ctx, 0)
	<-g.entered
	second := do(b, ctx, 1)
	if ws := <-g.entered; !slices.Equal(ws, []int{1}) {
		t.Fatalf("the second send: %v", ws)
	}
	third := do(b, ctx, 2)
	waitFor(t, func() bool { return b.Pending() == 1 })
	fourth := do(b, ctx, 3)
	waitFor(t, func() bool { return b.Pending() == 2 })
	if n := b.Senders(); n != 2 {
		t.Fatalf("%d senders, want 2", n)
	}
	g.release <- struct{}{}
	g.release <- struct{}{}
	if ws := <-g.entered; !slices.Equal(ws, []int{2, 3}) {
		t.Fatalf("the third send: %v, want [2 3]", ws)
	}
	g.release <- struct{}{}
	for i, ch := range []<-chan outcome{first, second, third, fourth} {
		mustDone(t, ch, 1000+i)
	}
}

// A call whose context ends while it waits is withdrawn: Do returns the
// context's error, and no send takes the call.
func TestWithdrawn(t *testing.T) {
	g := newGated()
	b := New(g.send, Limits{MaxBatch: 8, MaxInFlight: 1})
	first := do(b, ctx, 0)
	<-g.entered
	leaving, leave := context.WithCancel(ctx)
	second := do(b, leaving, 1)
	waitFor(t, func() bool { return b.Pending() == 1 })
	short := newExpiring()
	third := do(b, short, 2)
	waitFor(t, func() bool { return b.Pending() == 2 })
	fourth := do(b, ctx, 3)
	waitFor(t, func() bool { return b.Pending() == 3 })
	leave()
	short.expire()
	if o := <-second; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("the call withdrawn: %+v", o)
	}
	if o := <-third; !errors.Is(o.err, context.DeadlineExceeded) {
		t.Fatalf("the call past its deadline: %+v", o)
	}
	if n := b.Pending(); n != 1 {
		t.Fatalf("%d calls waiting, want 1", n)
	}
	g.release <- struct{}{}
	if ws := <-g.entered; !slices.Equal(ws, []int{3}) {
		t.Fatalf("the second send: %v, want [3]", ws)
	}
	g.release <- struct{}{}
	mustDone(t, first, 1000)
	mustDone(t, fourth, 1003)
}

// A call whose context ends once a send has taken it returns the context's
// error at once, while the send stalls; the send finishes the call on its
// own, touching only the call (the race detector watches), and the
// batcher goes on.
func TestLeftWhileTaken(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, func())
		want error
	}{
		{"cancelled", func() (context.Context, func()) { return context.WithCancel(ctx) }, context.Canceled},
		{"deadline", func() (context.Context, func()) { c := newExpiring(); return c, c.expire }, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGated()
			b := New(g.send, Limits{MaxBatch: 8, MaxInFlight: 2})
			first := do(b, ctx, 0)
			<-g.entered
			leaving, leave := tc.ctx()
			second := do(b, leaving, 1)
			if ws := <-g.entered; !slices.Equal(ws, []int{1}) {
				t.Fatalf("the second send: %v", ws)
			}
			leave()
			if o := <-second; !errors.Is(o.err, tc.want) {
				t.Fatalf("the caller that left: %+v, want %v", o, tc.want)
			}
			g.release <- struct{}{}
			g.release <- struct{}{}
			mustDone(t, first, 1000)
			waitFor(t, func() bool { return b.Senders() == 0 })
			third := do(b, ctx, 2)
			<-g.entered
			g.release <- struct{}{}
			mustDone(t, third, 1002)
		})
	}
}

// expiring is a context whose deadline passes when the test says so.
type expiring struct {
	context.Context
	done chan struct{}
}

func newExpiring() *expiring { return &expiring{Context: ctx, done: make(chan struct{})} }

func (c *expiring) expire()                     { close(c.done) }
func (c *expiring) Done() <-chan struct{}       { return c.done }
func (c *expiring) Deadline() (time.Time, bool) { return time.Now().Add(time.Hour), true }
func (c *expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// Beyond MaxPending calls waiting, Do fails at once with ErrFull.
func TestFull(t *testing.T) {
	g := newGated()
	b := New(g.send, Limits{MaxBatch: 8, MaxInFlight: 1, MaxPending: 2})
	first := do(b, ctx, 0)
	<-g.entered
	second := do(b, ctx, 1)
	waitFor(t, func() bool { return b.Pending() == 1 })
	third := do(b, ctx, 2)
	waitFor(t, func() bool { return b.Pending() == 2 })
	if o := <-do(b, ctx, 3); !errors.Is(o.err, ErrFull) {
		t.Fatalf("a call beyond the bound: %+v, want ErrFull", o)
	}
	if err := b.DoAll(ctx, []*Call[int]{{}}); !errors.Is(err, ErrFull) {
		t.Fatalf("DoAll beyond the bound: %v, want ErrFull", err)
	}
	g.release <- struct{}{}
	<-g.entered
	g.release <- struct{}{}
	mustDone(t, first, 1000)
	mustDone(t, second, 1001)
	mustDone(t, third, 1002)
}

// DoAll's calls go in one send: from the caller's goroutine when nothing
// is under way, else in the next batch, together.
func TestDoAll(t *testing.T) {
	g := newGated()
	b := New(g.send, Limits{MaxBatch: 8, MaxInFlight: 1})
	calls := func() []*Call[int] { return []*Call[int]{{Work: 1}, {Work: 2}, {Work: 3}} }
	all := func(ctx context.Context, cs []*Call[int]) <-chan error {
		ch := make(chan error, 1)
		go func() { ch <- b.DoAll(ctx, cs) }()
		return ch
	}
	check := func(cs []*Call[int]) {
		t.Helper()
		for i, c := range cs {
			if c.Work != 1001+i {
				t.Fatalf("call %d: work %d", i, c.Work)
			}
		}
	}
	alone := calls()
	errc := all(ctx, alone)
	if ws := <-g.entered; !slices.Equal(ws, []int{1, 2, 3}) {
		t.Fatalf("DoAll alone: %v", ws)
	}
	g.release <- struct{}{}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	check(alone)

	first := do(b, ctx, 0)
	<-g.entered
	queued := calls()
	errc = all(ctx, queued)
	waitFor(t, func() bool { return b.Pending() == 3 })
	g.release <- struct{}{}
	if ws := <-g.entered; !slices.Equal(ws, []int{1, 2, 3}) {
		t.Fatalf("DoAll queued: %v", ws)
	}
	g.release <- struct{}{}
	mustDone(t, first, 1000)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	check(queued)

	// Leaving: the calls waiting are withdrawn.
	first = do(b, ctx, 0)
	<-g.entered
	leaving, leave := context.WithCancel(ctx)
	errc = all(leaving, calls())
	waitFor(t, func() bool { return b.Pending() == 3 })
	leave()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("DoAll left: %v", err)
	}
	if n := b.Pending(); n != 0 {
		t.Fatalf("%d calls waiting after DoAll left", n)
	}
	g.release <- struct{}{}
	mustDone(t, first, 1000)
}

// A send may take its calls late, once a resource is free (the file's
// lock), and give up when no call is waiting any more: every caller
// leaves with its context's error, and nothing was done.
func TestTakeLate(t *testing.T) {
	lock := make(chan struct{})
	var took atomic.Int64
	send := func(_ context.Context, calls []*Call[int]) {
		for {
			n := 0
			var done <-chan struct{}
			for _, c := range calls {
				if c.Waiting() {
					n, done = n+1, c.Context().Done()
				}
			}
			if n == 0 {
				return // abandoned
			}
			select {
			case <-lock:
				for _, c := range Take(calls) {
					took.Add(1)
					c.Work += 1000
				}
				return
			case <-done:
			}
		}
	}
	b := New(send, Limits{MaxBatch: 8, MaxInFlight: 1})
	// Alone, its caller's send waiting for the lock.
	leaving, leave := context.WithCancel(ctx)
	lone := do(b, leaving, 0)
	waitFor(t, func() bool { return b.Senders() == 1 })
	var waiting []<-chan outcome
	var leaves []func()
	for i := 1; i <= 3; i++ {
		c, leave := context.WithCancel(ctx)
		waiting, leaves = append(waiting, do(b, c, i)), append(leaves, leave)
		waitFor(t, func() bool { return b.Pending() == i })
	}
	leave()
	if o := <-lone; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("the lone caller that left: %+v", o)
	}
	// A sender takes the three, and waits for the lock; they leave.
	waitFor(t, func() bool { return b.Pending() == 0 })
	for i, leave := range leaves {
		leave()
		if o := <-waiting[i]; !errors.Is(o.err, context.Canceled) {
			t.Fatalf("caller %d, left: %+v", i+1, o)
		}
	}
	waitFor(t, func() bool { return b.Senders() == 0 })
	if n := took.Load(); n != 0 {
		t.Fatalf("%d calls taken, of callers all gone", n)
	}
	// The next call takes the lock.
	next := do(b, ctx, 7)
	lock <- struct{}{}
	mustDone(t, next, 1007)
}

// A send that leaves out a call whose caller waits is broken: the lone
// caller is told so, and not that its call was done.
func TestSendLeavesOut(t *testing.T) {
	b := New(func(context.Context, []*Call[int]) {}, Limits{})
	if err := b.Do(ctx, &Call[int]{}); !errors.Is(err, errNotTaken) {
		t.Fatalf("Do: %v, want errNotTaken", err)
	}
}

// A batch's context ends at the latest deadline of its callers still
// waiting, or never when one of them has none; no caller's cancels it.
func TestBatchContext(t *testing.T) {
	now := time.Now()
	call := func(ctx context.Context, state int32) *Call[int] {
		c := &Call[int]{ctx: ctx}
		c.state.Store(state)
		return c
	}
	early, cancel1 := context.WithDeadline(ctx, now.Add(time.Second))
	defer cancel1()
	late, cancel2 := context.WithDeadline(ctx, now.Add(2*time.Second))
	defer cancel2()
	gone, cancel3 := context.WithDeadline(ctx, now.Add(time.Hour))
	defer cancel3()
	for _, tc := range []struct {
		name  string
		calls []*Call[int]
		want  time.Time // zero for none
	}{
		{"latest", []*Call[int]{call(early, waiting), call(late, waiting), call(gone, withdrawn)}, now.Add(2 * time.Second)},
		{"one without", []*Call[int]{call(early, waiting), call(ctx, waiting)}, time.Time{}},
		{"none waiting", []*Call[int]{call(early, withdrawn)}, time.Time{}},
		{"alone", []*Call[int]{call(early, waiting)}, now.Add(time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bctx, cancel := batchContext(tc.calls)
			defer cancel()
			dl, ok := bctx.Deadline()
			if ok != !tc.want.IsZero() || !dl.Equal(tc.want) {
				t.Fatalf("deadline %v (%v), want %v", dl, ok, tc.want)
			}
		})
	}
	cancel1()
	bctx, cancel := batchContext([]*Call[int]{call(early, waiting), call(late, waiting)})
	defer cancel()
	if bctx.Err() != nil {
		t.Fatal("a caller's cancel ended the batch's context")
	}
}

// Many callers with deadlines from a few µs to a few ms, reading their
// calls' outcomes as soon as Do returns, while sends take their time:
// under the race detector, no send touches a call once its caller has
// left, and a call done for its caller was taken, and carried out once.
func TestCallersLeavingRace(t *testing.T) {
	var taken sync.Map // call id -> times carried out
	send := func(_ context.Context, calls []*Call[int]) {
		calls = Take(calls)
		for range 3 {
			runtime.Gosched()
		}
		for _, c := range calls {
			n, _ := taken.LoadOrStore(c.Work, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			c.Work = -c.Work
		}
	}
	b := New(send, Limits{MaxBatch: 16, MaxInFlight: 2, MaxPending: 10_000})
	var wg sync.WaitGroup
	var doneCalls, left atomic.Int64
	for g := range 32 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			c := &Call[int]{}
			for i := range 200 {
				id := g*1000 + i + 1
				ctx, cancel := context.WithTimeout(ctx, 2*time.Microsecond+time.Duration(r.Int64N(int64(2*time.Millisecond))))
				c.Work = id
				err := b.Do(ctx, c)
				cancel()
				if err != nil {
					left.Add(1)
					c = &Call[int]{} // c is no longer ours
					continue
				}
				doneCalls.Add(1)
				if c.Work != -id || c.Err != nil {
					t.Errorf("call %d: work %d, err %v", id, c.Work, c.Err)
				}
				if n, ok := taken.Load(id); !ok || n.(*atomic.Int64).Load() != 1 {
					t.Errorf("call %d done, but not carried out once", id)
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, func() bool { return b.Senders() == 0 })
	taken.Range(func(_, n any) bool {
		if n.(*atomic.Int64).Load() != 1 {
			t.Error("a call carried out more than once")
		}
		return true
	})
	t.Logf("%d calls done, %d left", doneCalls.Load(), left.Load())
}

// With Detach, a lone caller's call goes from a sender, and its caller
// leaves at once when its context ends, however long the send stalls; the send
// finishes the call on its own (the race detector watches).
func TestDetach(t *testing.T) {
	g := newGated()
	b := New(g.send, Limits{MaxBatch: 8, MaxInFlight: 2, Detach: true})
	leaving, leave := context.WithCancel(ctx)
	first := do(b, leaving, 1)
	if ws := <-g.entered; !slices.Equal(ws, []int{1}) {
		t.Fatalf("the send: %v", ws)
	}
	leave()
	if o := <-first; !errors.Is(o.err, context.Canceled) {
		t.Fatalf("the caller that left: %+v, want context.Canceled", o)
	}
	g.release <- struct{}{}
	waitFor(t, func() bool { return b.Senders() == 0 })
	// A caller that stays gets its call done, by a sender.
	second := do(b, ctx, 2)
	<-g.entered
	g.release <- struct{}{}
	mustDone(t, second, 1002)
	// DoAll's calls leave together.
	calls := []*Call[int]{{Work: 3}, {Work: 4}}
	done := make(chan error, 1)
	go func() { done <- b.DoAll(ctx, calls) }()
	if ws := <-g.entered; !slices.Equal(ws, []int{3, 4}) {
		t.Fatalf("DoAll's send: %v", ws)
	}
	g.release <- struct{}{}
	if err := <-done; err != nil || calls[0].Work != 1003 || calls[1].Work != 1004 {
		t.Fatalf("DoAll: %v, work %d %d", err, calls[0].Work, calls[1].Work)
	}
	waitFor(t, func() bool { return b.Senders() == 0 })
}

// BenchmarkLone is one caller's call after another, each alone: sent
// from the caller's goroutine, and with Detach from a sender's.
func BenchmarkLone(b *testing.B) {
	for _, detach := range []bool{false, true} {
		b.Run(map[bool]string{false: "caller", true: "detached"}[detach], func(b *testing.B) {
			bt := New(func(_ context.Context, calls []*Call[int]) {
				for _, c := range Take(calls) {
					c.Work++
				}
			}, Limits{MaxBatch: 8, MaxInFlight: 2, Detach: detach})
			c := &Call[int]{}
			b.ReportAllocs()
			for b.Loop() {
				if err := bt.Do(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
