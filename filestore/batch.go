package filestore

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/floodgate/floodgate/store"
)

// defaultMaxBatch bounds the calls carried out in one transaction.
const defaultMaxBatch = 256

// batcher hands the calls of a Store to the file one transaction at a
// time, many calls in one transaction when they arrive together: a call
// that finds the file free goes at once, from its own goroutine; calls
// that arrive meanwhile wait in pending, and when the transaction ends a
// goroutine carries them out, up to maxBatch in each transaction, until
// none is left, and then ends. Each call is carried out as if alone, in
// the order they came, so batching changes no decision; it saves a
// transaction's fixed costs (opening the file, two fsyncs) per call.
type batcher struct {
	store    *Store
	maxBatch int

	mu      sync.Mutex
	pending []*call
	busy    bool // a transaction is under way, or about to be
}

// call is one Apply (or Decide) on its way to the file.
type call struct {
	ops   []store.Op
	ctx   context.Context
	state atomic.Int32 // waiting, then cancelled or taken
	err   error
	done  chan struct{} // closed when the call is over; nil for a lone call
}

// A call's states: it waits for a transaction until the transaction
// takes it or its context ends, whichever comes first.
const (
	waiting   = iota
	cancelled // nothing was done
	taken     // carried out (or failed) by a transaction
)

func (c *call) signal() {
	if c.done != nil {
		close(c.done)
	}
}

// submit carries out c and returns its error: the transaction's, one of
// its own ops', or its context's, if that ended before a transaction took
// the call (nothing was done then).
func (b *batcher) submit(c *call) error {
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		b.store.run([]*call{c})
		b.next()
		return c.err
	}
	c.done = make(chan struct{})
	b.pending = append(b.pending, c)
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.err
	case <-c.ctx.Done():
		if !c.state.CompareAndSwap(waiting, cancelled) {
			// A transaction took it first, or is giving up on it.
			<-c.done
			return c.err
		}
		b.mu.Lock()
		if i := slices.Index(b.pending, c); i >= 0 {
			b.pending = slices.Delete(b.pending, i, i+1)
		}
		b.mu.Unlock()
		return c.ctx.Err()
	}
}

// submitAll carries out calls, each as if alone, and returns the first
// error among them: in one transaction when the file is free, else in the
// transactions that take the pending calls, in order.
func (b *batcher) submitAll(calls []*call) error {
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		b.mu.Unlock()
		b.store.run(calls)
		b.next()
		return firstErr(calls)
	}
	for _, c := range calls {
		c.done = make(chan struct{})
	}
	b.pending = append(b.pending, calls...)
	b.mu.Unlock()
	for _, c := range calls {
		select {
		case <-c.done:
		case <-c.ctx.Done():
			if c.state.CompareAndSwap(waiting, cancelled) {
				b.mu.Lock()
				if i := slices.Index(b.pending, c); i >= 0 {
					b.pending = slices.Delete(b.pending, i, i+1)
				}
				b.mu.Unlock()
				c.err = c.ctx.Err()
				continue
			}
			<-c.done
		}
	}
	return firstErr(calls)
}

func firstErr(calls []*call) error {
	for _, c := range calls {
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

// next ends a transaction: it hands the calls that came meanwhile to a
// new goroutine, or marks the file free.
func (b *batcher) next() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) > 0 {
		go b.flush()
		return
	}
	b.busy = false
}

// flush carries out pending calls until there are none.
func (b *batcher) flush() {
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
		n := min(len(b.pending), b.maxBatch)
		calls := slices.Clone(b.pending[:n])
		b.pending = slices.Delete(b.pending, 0, n)
		b.mu.Unlock()
		b.store.run(calls)
	}
}
