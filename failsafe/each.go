package failsafe

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/floodgate/floodgate/store"
)

// ApplyEach implements store.Store: the ops, each as if alone, are
// decided partition by partition. The ops of partitions that are up, and
// of those due for a probe, go to the store's ApplyEach together; the ops
// of the others are decided by the mode. When the store fails on some
// ops only (store.ErrPartialFailure), only their partitions count the
// failure, and only those ops are decided by the mode; the others keep
// the store's decisions. See the package documentation.
func (f *Store) ApplyEach(ctx context.Context, ops []store.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.Check(ops, f.policy); err != nil {
		return fmt.Errorf("failsafe: %w", err)
	}
	if len(ops) == 0 {
		return nil
	}
	var partsBuf [4]part // most calls touch a few partitions and ops: no allocation
	var ofBuf [16]int
	var modeBuf [16]bool
	e := eachCall{ops: ops, mode: modeBuf[:0]}
	e.parts, e.of = f.partition(ops, partsBuf[:0], ofBuf[:0])
	for i := range ops {
		e.mode = append(e.mode, !e.parts[e.of[i]].send)
	}
	if err := f.sendEach(ctx, &e); err != nil {
		return err
	}
	return f.fallbackEach(ctx, &e)
}

// eachCall is one ApplyEach in progress: its ops, split by partition.
type eachCall struct {
	ops   []store.Op
	parts []part
	of    []int  // of[i] is the index in parts of ops[i]'s partition
	mode  []bool // mode[i]: ops[i] is to be decided by the mode
}

// part is one partition of an ApplyEach.
type part struct {
	b      *breaker
	g      uint64 // b's generation when the call went to the store
	send   bool   // the partition's ops go to the store
	probe  bool   // and probe it, down
	failed bool   // the store failed on some of the partition's ops
	cut    bool   // some were cut short by the caller's context
}

// partition appends to parts the partitions of ops, each once, with its
// breaker and whether its ops go to the store, up or probing it, and to
// of the index in parts of each op's.
func (f *Store) partition(ops []store.Op, parts []part, of []int) ([]part, []int) {
	for i := range ops {
		b := f.breakerOfOp(&ops[i])
		j := 0
		for j < len(parts) && parts[j].b != b {
			j++
		}
		if j == len(parts) {
			parts = append(parts, part{b: b})
		}
		of = append(of, j)
	}
	for j := range parts {
		p := &parts[j]
		g, down := p.b.state()
		switch {
		case !down:
			p.g, p.send = g, true
		case probeable(opsOf(ops, of, j)) && f.acquireProbe(p.b):
			p.g, p.send, p.probe = p.b.gen.Load(), true, true
		}
	}
	return parts, of
}

// opsOf returns copies of the ops of partition j, of giving each op's,
// for probeable.
func opsOf(ops []store.Op, of []int, j int) []store.Op {
	var in []store.Op
	for i := range ops {
		if of[i] == j {
			in = append(in, ops[i])
		}
	}
	return in
}

// sendEach sends the ops of the partitions to send to the store's
// ApplyEach, within the Timeout, leaving out the refunds of units the
// local store admitted, and records each partition's outcome. It returns
// an error for a call that its caller's context cut short, which is no
// failure.
func (f *Store) sendEach(ctx context.Context, e *eachCall) error {
	inner := make([]store.Op, 0, len(e.ops))
	idx := make([]int, 0, len(e.ops))
	for i := range e.ops {
		if !e.parts[e.of[i]].send {
			continue
		}
		e.ops[i].Result = store.Result{}
		op := e.ops[i]
		if op.Kind == store.OpRefund && isLocalStamp(op.Stamp) {
			continue
		}
		op.Table = op.Table.(*table).inner
		inner = append(inner, op)
		idx = append(idx, i)
	}
	var err error
	if len(inner) > 0 {
		c, cancel := f.bound(ctx)
		if cancel != nil {
			defer cancel()
		}
		err = f.store.ApplyEach(c, inner)
		if err != nil && !errors.Is(err, store.ErrPartialFailure) {
			return f.wholeFailed(ctx, c, e, err)
		}
		err = f.opsFailed(ctx, c, e, inner, idx)
	}
	f.record(e, err)
	return nil
}

// wholeFailed handles a call to the store that failed as a whole with
// err: every partition sent failed, or, cut short by the caller's
// context, none, and then it returns the caller's error.
func (f *Store) wholeFailed(ctx, c context.Context, e *eachCall, err error) error {
	if !isFailure(ctx, c, err) {
		for j := range e.parts {
			if e.parts[j].probe {
				e.parts[j].b.probing.Store(false)
			}
		}
		return callerErr(ctx, err)
	}
	for j := range e.parts {
		e.parts[j].failed = e.parts[j].send
	}
	for i := range e.mode {
		e.mode[i] = true
	}
	f.record(e, err)
	return nil
}

// opsFailed copies the results of inner, the ops of e at idx, to e's ops,
// marks the partitions of the ops the store failed on, and returns the
// first such failure. An op cut short by its caller's context keeps its
// error, and fails nothing.
func (f *Store) opsFailed(ctx, c context.Context, e *eachCall, inner []store.Op, idx []int) error {
	var first error
	for j, i := range idx {
		r := &inner[j].Result
		cause := r.Failure()
		switch {
		case cause == nil:
			e.ops[i].Result = *r
		case !isFailure(ctx, c, cause):
			e.ops[i].Result = store.Result{Err: store.PartialFailure(callerErr(ctx, cause))}
			e.parts[e.of[i]].cut = true
		default:
			e.parts[e.of[i]].failed, e.mode[i] = true, true
			first = cmp.Or(first, cause)
		}
	}
	return first
}

// record moves the breakers of the partitions sent: up on success, a
// failure (err) where the store failed.
func (f *Store) record(e *eachCall, err error) {
	if err != nil {
		f.stats[countFailures].Add(1)
	}
	for j := range e.parts {
		p := &e.parts[j]
		switch {
		case !p.send:
		case p.failed:
			f.fail(p.b, p.g, err, p.probe)
		case p.cut && p.probe: // says nothing of the store: the probe gives way
			p.b.probing.Store(false)
		case p.cut:
		case p.probe:
			f.up(p.b, p.g)
		default:
			p.b.succeeded()
		}
	}
}

// fallbackEach decides by the mode the ops of the partitions not sent and
// the ops the store failed on, partition by partition, and returns
// ApplyEach's error: nil when every op was decided; the mode's error
// when no op was; else one wrapping store.ErrPartialFailure, with each
// op's own in its Result.
func (f *Store) fallbackEach(ctx context.Context, e *eachCall) error {
	var first error
	failed := 0
	for j := range e.parts {
		p := &e.parts[j]
		if p.send && !p.failed {
			continue
		}
		var fb []store.Op
		var idx []int
		for i := range e.ops {
			if e.of[i] == j && e.mode[i] {
				op := e.ops[i]
				op.Result = store.Result{}
				fb, idx = append(fb, op), append(idx, i)
			}
		}
		err := f.applyFallback(ctx, p.b, fb, true)
		var opErr error
		if err != nil {
			opErr = store.PartialFailure(err)
			if first == nil {
				first = err
			}
		}
		for k, i := range idx {
			e.ops[i].Result = fb[k].Result
			if opErr != nil {
				e.ops[i].Result.Err = opErr
			}
		}
	}
	for i := range e.ops {
		if cause := e.ops[i].Result.Failure(); cause != nil {
			failed++
			first = cmp.Or(first, cause)
		}
	}
	switch {
	case failed == 0:
		return nil
	case failed == len(e.ops):
		return first
	}
	return fmt.Errorf("failsafe: %w: %d of %d ops failed: %w", store.ErrPartialFailure, failed, len(e.ops), first)
}
