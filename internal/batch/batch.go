package batch

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrFull is returned by Do and DoAll when MaxPending calls wait already.
var ErrFull = errors.New("too many calls waiting")

// errNotTaken is returned for a call that its send left out although its
// caller's context had not ended: a broken send function.
var errNotTaken = errors.New("batch: the send left out a call whose caller waits")

// A Call is one caller's work on its way to the store. The caller sets
// Work, hands the call to Do, and reads Work and Err once Do returns nil;
// meanwhile they are the send's. A call may be used again after Do
// returns nil, never after Do returns an error.
type Call[T any] struct {
	// Work is what the call carries out, and then its outcome: the
	// call's own, never memory that its caller keeps.
	Work T
	// Err is set by the send: the call failed as a whole.
	Err error

	ctx   context.Context
	state atomic.Int32
	done  chan struct{} // the send's word that the call is done, made when the call waits
	one   [1]*Call[T]   // the call alone, as a lone caller sends it
}

// A call's states; the package documentation draws the moves.
const (
	waiting int32 = iota
	taken
	done
	withdrawn
	left
)

// Context returns the context of the call's caller.
func (c *Call[T]) Context() context.Context { return c.ctx }

// Waiting reports whether the call waits for its send to take it and its
// caller has not left: the call has not been taken, and its context has
// not ended. A send that waits for a resource before taking its calls
// gives up when none is waiting.
func (c *Call[T]) Waiting() bool { return c.state.Load() == waiting && c.ctx.Err() == nil }

// Take takes the calls that are waiting (see Call.Waiting), for a send
// about to carry them out, and returns them, in order, in calls' own
// array. The calls it leaves out are not the send's to touch: their
// callers have left.
func Take[T any](calls []*Call[T]) []*Call[T] {
	out := calls[:0]
	for _, c := range calls {
		if c.ctx.Err() == nil && c.state.CompareAndSwap(waiting, taken) {
			out = append(out, c)
		}
	}
	return out
}

// Limits bound a Batcher.
type Limits struct {
	MaxBatch    int // calls in one send, at least 1
	MaxInFlight int // sends under way at once, a lone caller's among them, at least 1
	MaxPending  int // calls waiting, beyond which Do fails with ErrFull; 0 for no bound
	// Detach sends a lone caller's call from a sender too, as if it
	// waited, so that every caller can leave when its context ends
	// (see the package documentation), even while a send that ignores
	// its context stalls. A lone call then costs a goroutine's start
	// and a channel handoff.
	Detach bool
}

// A Batcher gathers calls into sends, as the package documentation
// describes. Make one with New; it is safe for concurrent use.
type Batcher[T any] struct {
	send   func(ctx context.Context, calls []*Call[T])
	limits Limits

	mu       sync.Mutex
	pending  []*Call[T]
	inFlight int          // senders, a lone caller's sending among them
	out      atomic.Int32 // sends under way
}

// New returns a Batcher whose calls are carried out by send. send takes
// the calls it carries out with Take, at once or once it is ready to (it
// may wait for a resource meanwhile, and give up when no call is Waiting
// any more); it sets each taken call's Work and Err, and keeps none of
// the calls once it returns. Its context is the caller's own for a call
// sent alone, or for a batch of several one that no caller's cancels,
// and ends at the latest of their deadlines when every caller has one.
func New[T any](send func(ctx context.Context, calls []*Call[T]), l Limits) *Batcher[T] {
	l.MaxBatch, l.MaxInFlight = max(l.MaxBatch, 1), max(l.MaxInFlight, 1)
	return &Batcher[T]{send: send, limits: l}
}

// Do carries out c and returns nil once it is done: c.Work and c.Err are
// then the caller's. It returns an error when the call was not done for
// its caller: ErrFull, with nothing done; or the context's error, when
// ctx ended first: nothing was done if the call was still waiting,
// otherwise it may still take effect. c is then no longer the caller's.
func (b *Batcher[T]) Do(ctx context.Context, c *Call[T]) error {
	c.ctx, c.Err = ctx, nil
	c.state.Store(waiting)
	b.mu.Lock()
	if b.alone() {
		b.inFlight++
		b.mu.Unlock()
		c.one[0] = c
		b.sendAlone(ctx, c.one[:])
		c.one[0] = nil
		return finishAlone(ctx, c)
	}
	if err := b.enqueue(c); err != nil {
		return err
	}
	return b.wait(ctx, c)
}

// DoAll carries out calls, all with ctx, and returns nil once every one
// is done; they wait together, so that they go in one send when they fit.
// An error is Do's: the calls are then no longer the caller's, and some
// may have taken effect.
func (b *Batcher[T]) DoAll(ctx context.Context, calls []*Call[T]) error {
	for _, c := range calls {
		c.ctx, c.Err = ctx, nil
		c.state.Store(waiting)
	}
	b.mu.Lock()
	if b.alone() {
		b.inFlight++
		b.mu.Unlock()
		b.sendAlone(ctx, slices.Clone(calls))
		for _, c := range calls {
			if err := finishAlone(ctx, c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := b.enqueue(calls...); err != nil {
		return err
	}
	for i, c := range calls {
		if err := b.wait(ctx, c); err != nil {
			for _, c := range calls[i+1:] {
				b.leave(ctx, c)
			}
			return err
		}
	}
	return nil
}

// alone reports whether a caller sends its calls itself: nothing is
// under way, and the batcher does not detach its callers. b.mu is held.
func (b *Batcher[T]) alone() bool {
	return !b.limits.Detach && b.inFlight == 0 && len(b.pending) == 0
}

// enqueue queues calls, starting a sender when there is room for one, or
// returns ErrFull. b.mu is held, and enqueue releases it.
func (b *Batcher[T]) enqueue(calls ...*Call[T]) error {
	defer b.mu.Unlock()
	if b.limits.MaxPending > 0 && len(b.pending)+len(calls) > b.limits.MaxPending {
		return ErrFull
	}
	for _, c := range calls {
		if c.done == nil {
			c.done = make(chan struct{}, 1)
		}
	}
	b.pending = append(b.pending, calls...)
	if b.inFlight < b.limits.MaxInFlight {
		b.inFlight++
		go b.flush()
	}
	return nil
}

// wait waits for c, queued, until it is done or ctx ends.
func (b *Batcher[T]) wait(ctx context.Context, c *Call[T]) error {
	select {
	case <-c.done:
		c.ctx = nil
		return nil
	case <-ctx.Done():
		return b.leave(ctx, c)
	}
}

// leave withdraws c, or leaves it to its send, or finds it done, for a
// caller whose context has ended.
func (b *Batcher[T]) leave(ctx context.Context, c *Call[T]) error {
	if c.state.CompareAndSwap(waiting, withdrawn) {
		b.mu.Lock()
		if i := slices.Index(b.pending, c); i >= 0 {
			b.pending = slices.Delete(b.pending, i, i+1)
		}
		b.mu.Unlock()
		return ctx.Err()
	}
	if c.state.CompareAndSwap(taken, left) {
		return ctx.Err()
	}
	<-c.done // done: the send's word is on its way
	c.ctx = nil
	return nil
}

// finishAlone ends a call that its caller sent: done, or left out by the
// send because ctx ended.
func finishAlone[T any](ctx context.Context, c *Call[T]) error {
	if !c.state.CompareAndSwap(taken, done) {
		if err := ctx.Err(); err != nil {
			return err
		}
		return errNotTaken
	}
	c.ctx = nil
	return nil
}

// sendAlone sends calls from their caller's goroutine, then hands the
// calls that came meanwhile to a sender, or counts the caller out.
func (b *Batcher[T]) sendAlone(ctx context.Context, calls []*Call[T]) {
	b.sendCounted(ctx, calls)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) > 0 {
		go b.flush()
		return
	}
	b.inFlight--
}

// flush sends batches of waiting calls until there are none.
func (b *Batcher[T]) flush() {
	var batch, held []*Call[T] // reused from batch to batch
	for {
		b.gather()
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.inFlight--
			b.mu.Unlock()
			return
		}
		n := min(len(b.pending), b.limits.MaxBatch)
		batch = append(batch[:0], b.pending[:n]...)
		b.pending = slices.Delete(b.pending, 0, n)
		b.mu.Unlock()
		// The send's Take reorders batch; held keeps every call.
		held = append(held[:0], batch...)
		b.sendBatch(batch, held)
		clear(held)
	}
}

// sendBatch sends batch, whose calls held holds too, with a context of
// their deadlines, and tells each caller still waiting that its call is
// done.
func (b *Batcher[T]) sendBatch(batch, held []*Call[T]) {
	ctx, cancel := batchContext(held)
	b.sendCounted(ctx, batch)
	cancel()
	for _, c := range held {
		if c.state.CompareAndSwap(taken, done) {
			c.done <- struct{}{}
		}
	}
}

// sendCounted sends calls, counted out meanwhile.
func (b *Batcher[T]) sendCounted(ctx context.Context, calls []*Call[T]) {
	b.out.Add(1)
	defer b.out.Add(-1)
	b.send(ctx, calls)
}

// maxYields bounds gather's yields.
const maxYields = 8

// gather waits for calls about to arrive before a sender takes its batch
// (see the package documentation): it yields the processor for as long
// as another send is under way and each yield brings new calls, at most
// maxYields times, and stops once a batch is full.
func (b *Batcher[T]) gather() {
	n := b.Pending()
	for range maxYields {
		if b.out.Load() == 0 {
			return // the store has nothing to do: send now
		}
		runtime.Gosched()
		m := b.Pending()
		if m == n || m >= b.limits.MaxBatch {
			return
		}
		n = m
	}
}

// Pending returns the number of calls waiting for a sender.
func (b *Batcher[T]) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// Senders returns the number of senders, a lone caller sending among
// them.
func (b *Batcher[T]) Senders() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}

// batchContext returns a context for sending calls: not cancelled with
// any caller's, and ending at the latest of the deadlines of the callers
// still waiting when each has one (else the store's own timeouts bound
// the send); a call alone goes with its caller's own, as a lone caller's
// does, since nobody else waits for the send.
func batchContext[T any](calls []*Call[T]) (context.Context, context.CancelFunc) {
	if len(calls) == 1 && calls[0].state.Load() == waiting {
		return calls[0].ctx, noCancel
	}
	var last time.Time
	var base context.Context
	for _, c := range calls {
		if c.state.Load() != waiting {
			continue
		}
		if base == nil {
			base = context.WithoutCancel(c.ctx)
		}
		dl, ok := c.ctx.Deadline()
		if !ok {
			return base, noCancel
		}
		if dl.After(last) {
			last = dl
		}
	}
	if base == nil {
		return context.Background(), noCancel
	}
	return context.WithDeadline(base, last)
}

// noCancel is the CancelFunc of a context that needs none.
var noCancel context.CancelFunc = func() {}
