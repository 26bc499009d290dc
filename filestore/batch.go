package filestore

import (
	"context"

	"github.com/floodgate/floodgate/internal/batch"
	"github.com/floodgate/floodgate/store"
)

// defaultMaxBatch bounds the calls carried out in one transaction.
const defaultMaxBatch = 256

// call is one Apply (or Decide, or one op of an ApplyEach) on its way to
// the file: its own copy of the caller's ops (see Store.do), and then
// their results.
type call = batch.Call[[]store.Op]

// newBatcher returns the batcher of s's calls (package batch), which
// hands them to the file one transaction at a time, many calls in one
// transaction when they arrive together: a call that finds the file free
// goes at once, from its own goroutine; calls that arrive meanwhile wait,
// and go up to maxBatch in each transaction. Each call is carried out as
// if alone, in the order they came, so batching changes no decision; it
// saves a transaction's fixed costs (opening the file, two fsyncs) per
// call.
func newBatcher(s *Store, maxBatch int) *batch.Batcher[[]store.Op] {
	return batch.New(func(_ context.Context, calls []*call) { s.run(calls) }, batch.Limits{MaxBatch: maxBatch, MaxInFlight: 1})
}

// do carries out c, whose ops are a copy of ops, and copies their results
// back to ops once c is done. When ctx ends first, do returns its error at
// once; c may still take effect, its results lost.
func (s *Store) do(ctx context.Context, c *call, ops []store.Op) error {
	if err := s.batcher.Do(ctx, c); err != nil {
		return err
	}
	for i := range ops {
		ops[i].Result = c.Work[i].Result
	}
	return c.Err
}

// doEach carries out each of ops as a call of its own, the calls
// submitted together, on copies of the ops, and copies their results back
// once every call is done. It returns the first call's error.
func (s *Store) doEach(ctx context.Context, ops []store.Op) error {
	own := make([]store.Op, len(ops))
	copy(own, ops)
	cs := make([]call, len(ops))
	calls := make([]*call, len(ops))
	for i := range cs {
		cs[i].Work = own[i : i+1]
		calls[i] = &cs[i]
	}
	if err := s.batcher.DoAll(ctx, calls); err != nil {
		return err
	}
	for i := range ops {
		ops[i].Result = own[i].Result
	}
	for _, c := range calls {
		if c.Err != nil {
			return c.Err
		}
	}
	return nil
}
