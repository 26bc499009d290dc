package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/redis/go-redis/v9"
)

// batcher sends calls to Redis, many in one script call when they arrive
// together. A call is a group of ops in one hash slot, carried out all or
// nothing; the groups of one script call are carried out one after
// another, each as if alone, so batching changes no decision.
//
// A call that finds fewer than maxInFlight script calls out goes at once,
// from its own goroutine when it is alone; calls that arrive meanwhile wait
// in pending, and the next sender takes up to maxBatch of them. Senders
// other than a lone caller run in a goroutine of their own, which sends
// until pending is empty and then ends: the store starts no goroutine that
// outlives the calls it serves.
type batcher struct {
	store       *Store
	maxBatch    int
	maxInFlight int
	maxPending  int

	mu       sync.Mutex
	pending  []*call
	inFlight int
}

type call struct {
	ops  []*floodgate.Op
	slot uint16
	ctx  context.Context
	err  error
	done chan struct{}
}

// do carries out ops, all in slot, and returns when they are done or ctx
// is. A call whose context ends while its script is out may still take
// effect.
func (b *batcher) do(ctx context.Context, ops []*floodgate.Op, slot uint16) error {
	c := &call{ops: ops, slot: slot, ctx: ctx}
	b.mu.Lock()
	if b.inFlight < b.maxInFlight && len(b.pending) == 0 {
		// Alone: send from this goroutine, with the caller's context.
		b.inFlight++
		b.mu.Unlock()
		b.store.send(ctx, []*call{c})
		b.finish()
		return c.err
	}
	if len(b.pending) >= b.maxPending {
		b.mu.Unlock()
		return fmt.Errorf("redisstore: %w (%d)", ErrOverloaded, b.maxPending)
	}
	c.done = make(chan struct{}, 1)
	b.pending = append(b.pending, c)
	if b.inFlight < b.maxInFlight {
		b.inFlight++
		go b.flush()
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		b.mu.Lock()
		for i, p := range b.pending {
			if p == c {
				b.pending = append(b.pending[:i], b.pending[i+1:]...)
				break
			}
		}
		b.mu.Unlock()
		return ctx.Err()
	}
}

// finish ends a send: it hands pending calls to a new flusher, or counts
// the sender out.
func (b *batcher) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) > 0 {
		go b.flush()
		return
	}
	b.inFlight--
}

// flush sends batches of pending calls until there are none.
func (b *batcher) flush() {
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.inFlight--
			b.mu.Unlock()
			return
		}
		n := min(len(b.pending), b.maxBatch)
		batch := make([]*call, n)
		copy(batch, b.pending)
		b.pending = append(b.pending[:0], b.pending[n:]...)
		b.mu.Unlock()
		ctx, cancel := batchContext(batch)
		b.store.send(ctx, batch)
		cancel()
		for _, c := range batch {
			c.done <- struct{}{}
		}
	}
}

// batchContext returns a context for sending batch: not cancelled with any
// one caller's, and ending at the latest of their deadlines when each has
// one (else the client's own timeouts bound the send).
func batchContext(batch []*call) (context.Context, context.CancelFunc) {
	var last time.Time
	for _, c := range batch {
		dl, ok := c.ctx.Deadline()
		if !ok {
			return context.WithoutCancel(c.ctx), func() {}
		}
		if dl.After(last) {
			last = dl
		}
	}
	return context.WithDeadline(context.WithoutCancel(batch[0].ctx), last)
}

// send carries out calls, one script call per hash slot, and sets each
// call's ops and error.
func (s *Store) send(ctx context.Context, calls []*call) {
	if !s.cluster || len(calls) == 1 {
		// One slot: one script call.
		keys, args := s.encode(calls)
		res, err := script.Run(ctx, s.client, keys, args...).Result()
		s.decode(calls, res, err)
		return
	}
	slots := map[uint16][]*call{}
	var order []uint16
	for _, c := range calls {
		if _, ok := slots[c.slot]; !ok {
			order = append(order, c.slot)
		}
		slots[c.slot] = append(slots[c.slot], c)
	}
	// Several slots (a Redis Cluster): one pipeline, which go-redis splits
	// by node, with a script call per slot; a node that lacks the script
	// gets it with a second pipeline.
	cmds := make([]*redis.Cmd, len(order))
	s.pipeline(ctx, order, slots, cmds, script.EvalSha)
	var missing []uint16
	for i, sl := range order {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			missing = append(missing, sl)
		}
	}
	if len(missing) > 0 {
		again := make([]*redis.Cmd, len(missing))
		s.pipeline(ctx, missing, slots, again, script.Eval)
		for i, j := 0, 0; i < len(order) && j < len(missing); i++ {
			if order[i] == missing[j] {
				cmds[i] = again[j]
				j++
			}
		}
	}
	for i, sl := range order {
		res, err := cmds[i].Result()
		s.decode(slots[sl], res, err)
	}
}

// pipeline sends one script call per slot in one pipeline, setting cmds.
func (s *Store) pipeline(ctx context.Context, order []uint16, slots map[uint16][]*call, cmds []*redis.Cmd,
	run func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd) {
	// Each command carries its own error, which decode reports.
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sl := range order {
			keys, args := s.encode(slots[sl])
			cmds[i] = run(ctx, p, keys, args...)
		}
		return nil
	})
}

// encode writes the script's keys and arguments for calls (lua/batch.lua).
func (s *Store) encode(calls []*call) (keys []string, args []any) {
	keyIndex := map[string]int{}
	policyIndex := map[*table]int{}
	var policies []string
	var ops []any
	for _, c := range calls {
		ops = append(ops, strconv.Itoa(len(c.ops)))
		for _, op := range c.ops {
			t := op.Table.(*table)
			rk := t.prefix + op.Key
			ki, ok := keyIndex[rk]
			if !ok {
				keys = append(keys, rk)
				ki = len(keys)
				keyIndex[rk] = ki
			}
			pi, ok := policyIndex[t]
			if !ok {
				policies = append(policies, t.wire[:]...)
				pi = len(policyIndex) + 1
				policyIndex[t] = pi
			}
			ops = append(ops, strconv.Itoa(int(op.Kind)), strconv.Itoa(ki), strconv.Itoa(pi),
				strconv.FormatInt(op.Now/1e9, 10), strconv.FormatInt(op.Now%1e9, 10), strconv.FormatInt(op.N, 10))
			switch op.Kind {
			case floodgate.OpSchedule:
				ops = append(ops, strconv.FormatInt(max(int64(op.MaxWait), 0), 10))
			case floodgate.OpRefund:
				st := op.Stamp
				if st.TAT < 0 || st.Frac < 0 || st.Frac >= t.policy.Limit() {
					st.TAT, st.Frac = 0, t.policy.Limit() // not a bucket's stamp: refunds nothing
				}
				ops = append(ops, strconv.FormatInt(st.At/1e9, 10), strconv.FormatInt(st.At%1e9, 10),
					strconv.FormatInt(st.TAT/1e9, 10), strconv.FormatInt(st.TAT%1e9, 10), strconv.FormatInt(st.Frac, 10))
			}
		}
	}
	mode := "s"
	if s.cfg.callerTime {
		mode = "c"
	}
	args = make([]any, 0, 4+len(policies)+len(ops))
	args = append(args, mode, strconv.FormatInt(s.cfg.minTTL.Milliseconds(), 10), strconv.Itoa(len(policyIndex)))
	for _, p := range policies {
		args = append(args, p)
	}
	args = append(args, strconv.Itoa(len(calls)))
	args = append(args, ops...)
	return keys, args
}

// decode sets the ops of calls from the script's reply.
func (s *Store) decode(calls []*call, res any, err error) {
	if err != nil {
		if strings.Contains(err.Error(), "floodgate: corrupt") {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		err = fmt.Errorf("redisstore: %w", err)
		for _, c := range calls {
			c.err = err
		}
		return
	}
	reply, _ := res.([]any)
	nops := 0
	for _, c := range calls {
		nops += len(c.ops)
	}
	if len(reply) != 2+opFields*nops {
		err = fmt.Errorf("redisstore: %w: a reply of %d values for %d ops", ErrCorrupt, len(reply), nops)
		for _, c := range calls {
			c.err = err
		}
		return
	}
	r := reply[2:]
	for _, c := range calls {
		for _, op := range c.ops {
			c.err = errors.Join(c.err, decodeOp(op, r[:opFields]))
			r = r[opFields:]
		}
	}
}

// opFields is the number of reply values per op (lua/batch.lua).
const opFields = 11

func decodeOp(op *floodgate.Op, v []any) error {
	var p replyParser
	allowed := p.int(v[0]) == 1
	d := algo.Decision{Allowed: allowed, Remaining: p.int(v[1])}
	if retry := p.dur(v[2]); retry == -1 {
		d.RetryAfter = algo.Never
	} else {
		d.RetryAfter = time.Duration(retry)
	}
	d.ResetAfter = time.Duration(p.dur(v[3]))
	atDelta := p.dur(v[4])
	st := algo.Stamp{At: p.int(v[5])*1e9 + p.int(v[6]), TAT: p.int(v[7])*1e9 + p.int(v[8]), Frac: p.int(v[9])}
	code := p.int(v[10])
	if p.err != nil {
		return fmt.Errorf("redisstore: %w: %v", ErrCorrupt, p.err)
	}
	op.Err, op.At, op.Stamp, op.Decision = nil, 0, algo.Stamp{}, algo.Decision{}
	if op.Kind != floodgate.OpDecide && op.Kind != floodgate.OpSchedule {
		return nil
	}
	op.Decision = d
	op.At = op.Now + atDelta
	if allowed && op.N > 0 {
		op.Stamp = st
	}
	if code == 1 {
		burst := op.Table.(*table).policy.Burst()
		op.Err = fmt.Errorf("redisstore: %w: cost %d, burst %d", floodgate.ErrCostExceedsBurst, op.N, burst)
	}
	return nil
}

// replyParser reads the script's reply values, remembering the first
// problem.
type replyParser struct{ err error }

func (p *replyParser) int(v any) int64 {
	i, ok := v.(int64)
	if !ok && p.err == nil {
		p.err = fmt.Errorf("%v (%T) where an integer belongs", v, v)
	}
	return i
}

// dur reads a duration: an integer, or a decimal string past 2^53.
func (p *replyParser) dur(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case string:
		i, err := strconv.ParseInt(v, 10, 64)
		if err != nil && p.err == nil {
			p.err = err
		}
		return i
	}
	if p.err == nil {
		p.err = fmt.Errorf("%v (%T) where a duration belongs", v, v)
	}
	return 0
}
