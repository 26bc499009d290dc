package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
)

// Flaky is a store that fails on demand, for the tests of what stands in
// front of a store (package failsafe, middleware, a service): a memory
// store behind a hook that every call passes first, as a call to Redis or
// a file goes out. Its tables refuse a key holding a NUL byte before the
// hook, as a real store checks its input before it calls out. It is safe
// for concurrent use; the zero Flaky is not ready, use NewFlaky.
type Flaky struct {
	mem   *memstore.Store
	calls atomic.Int64
	hook  atomic.Pointer[func(ctx context.Context, key string) error]
}

// NewFlaky returns a Flaky that works until told otherwise.
func NewFlaky() *Flaky { return &Flaky{mem: memstore.New(0)} }

// Set makes every call run h, with its context and its first op's key,
// and fail with h's error if it returns one; nil heals.
func (s *Flaky) Set(h func(ctx context.Context, key string) error) {
	if h == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&h)
}

// Fail makes every call fail with err.
func (s *Flaky) Fail(err error) { s.Set(func(context.Context, string) error { return err }) }

// Hang makes every call block until its context is done.
func (s *Flaky) Hang() {
	s.Set(func(ctx context.Context, _ string) error { <-ctx.Done(); return ctx.Err() })
}

// Heal makes calls work again.
func (s *Flaky) Heal() { s.Set(nil) }

// Calls returns the number of calls that went out: that passed the hook,
// failing or not.
func (s *Flaky) Calls() int64 { return s.calls.Load() }

// Inner returns the memory store behind the hook, to look at the state
// without going through it.
func (s *Flaky) Inner() *memstore.Store { return s.mem }

func (s *Flaky) callOut(ctx context.Context, key string) error {
	s.calls.Add(1)
	if h := s.hook.Load(); h != nil {
		return (*h)(ctx, key)
	}
	return nil
}

func checkKey(key string) error {
	if strings.ContainsRune(key, 0) {
		return fmt.Errorf("flaky: %w: NUL in %q", store.ErrInvalidKey, key)
	}
	return nil
}

type flakyTable struct {
	s     *Flaky
	inner store.Table
}

// Table implements store.Store.
func (s *Flaky) Table(name string, p algo.Policy) (store.Table, error) {
	t, err := s.mem.Table(name, p)
	if err != nil {
		return nil, err
	}
	return flakyTable{s, t}, nil
}

func (t flakyTable) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	if err := checkKey(key); err != nil {
		return algo.Decision{}, err
	}
	if err := t.s.callOut(ctx, key); err != nil {
		return algo.Decision{}, err
	}
	return t.inner.Decide(ctx, key, now, n)
}

// Apply implements store.Store: one call out for the whole batch.
func (s *Flaky) Apply(ctx context.Context, ops []store.Op) error {
	return s.apply(ctx, ops, s.mem.Apply)
}

// ApplyEach implements store.Store: one call out for all the ops.
func (s *Flaky) ApplyEach(ctx context.Context, ops []store.Op) error {
	return s.apply(ctx, ops, s.mem.ApplyEach)
}

func (s *Flaky) apply(ctx context.Context, ops []store.Op, do func(context.Context, []store.Op) error) error {
	inner := make([]store.Op, len(ops))
	for i, op := range ops {
		t, ok := op.Table.(flakyTable)
		if !ok || t.s != s {
			return fmt.Errorf("flaky: op %d: %w", i, store.ErrForeignTable)
		}
		if err := checkKey(op.Key); err != nil {
			return err
		}
		op.Table = t.inner
		inner[i] = op
	}
	if len(ops) > 0 {
		if err := s.callOut(ctx, ops[0].Key); err != nil {
			return err
		}
	}
	if err := do(ctx, inner); err != nil {
		return err
	}
	for i := range ops {
		ops[i].Result = inner[i].Result
	}
	return nil
}
