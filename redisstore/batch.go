package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	return b.submit(&call{ops: ops, slot: slot, ctx: ctx})
}

// single is a call of one op, made with one allocation.
type single struct {
	call
	op  floodgate.Op
	ops [1]*floodgate.Op
}

// decide carries out op alone (see do).
func (b *batcher) decide(ctx context.Context, op floodgate.Op, slot uint16) (floodgate.Op, error) {
	c := &single{op: op}
	c.ops[0] = &c.op
	c.call = call{ops: c.ops[:], slot: slot, ctx: ctx}
	err := b.submit(&c.call)
	return c.op, err
}

// submit carries out c (see do).
func (b *batcher) submit(c *call) error {
	ctx := c.ctx
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
		cmd := s.run.call(ctx, s.client, keys, args)
		if missing(cmd.Err()) {
			eval, err := s.run.load(ctx)
			if err != nil {
				s.decode(calls, nil, err)
				return
			}
			cmd = s.run.again(ctx, s.client, eval, keys, args)
		}
		res, err := cmd.Result()
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
	// by node, with a script call per slot; the slots whose node lacks the
	// script get it with a second pipeline.
	cmds := make([]*redis.Cmd, len(order))
	s.pipeline(ctx, order, slots, cmds, s.run.call)
	var miss []uint16
	for i, sl := range order {
		if missing(cmds[i].Err()) {
			miss = append(miss, sl)
		}
	}
	if len(miss) > 0 {
		eval, err := s.run.load(ctx)
		if err != nil {
			for _, sl := range miss {
				s.decode(slots[sl], nil, err)
			}
			return
		}
		again := make([]*redis.Cmd, len(miss))
		s.pipeline(ctx, miss, slots, again, func(ctx context.Context, c redis.Cmdable, keys []string, args []any) *redis.Cmd {
			return s.run.again(ctx, c, eval, keys, args)
		})
		for i, j := 0, 0; i < len(order) && j < len(miss); i++ {
			if order[i] == miss[j] {
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
	run func(context.Context, redis.Cmdable, []string, []any) *redis.Cmd) {
	// Each command carries its own error, which decode reports.
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sl := range order {
			keys, args := s.encode(slots[sl])
			cmds[i] = run(ctx, p, keys, args)
		}
		return nil
	})
}

// encode writes the script's keys and arguments for calls (lua/batch.lua).
// Numbers go as int64s, which go-redis writes in decimal without a string
// of their own (and boxes without allocating below 256); in server mode
// the ops' times, unused, go as zeros. The policies come first in the
// arguments, so a first pass finds them. A lone decision goes in the
// script's short form (encodeOne).
func (s *Store) encode(calls []*call) (keys []string, args []any) {
	if len(calls) == 1 && len(calls[0].ops) == 1 && calls[0].ops[0].Kind == floodgate.OpDecide {
		return s.encodeOne(calls[0].ops[0])
	}
	nops := 0
	var seen [4]*table
	tables := seen[:0]
	for _, c := range calls {
		nops += len(c.ops)
		for _, op := range c.ops {
			if t := op.Table.(*table); !slices.Contains(tables, t) {
				tables = append(tables, t)
			}
		}
	}
	// A map finds repeated keys in a big batch; a small one is searched.
	var keyIndex map[string]int
	if nops > 8 {
		keyIndex = make(map[string]int, nops)
	}
	args = make([]any, 0, 4+len(tables)+len(calls)+refundFields*nops)
	args = append(args, s.modeArg, s.minTTLArg, int64(len(tables)))
	for _, t := range tables {
		args = append(args, t.wireArg)
	}
	args = append(args, int64(len(calls)))
	for _, c := range calls {
		args = append(args, int64(len(c.ops)))
		for _, op := range c.ops {
			t := op.Table.(*table)
			rk := t.prefix + op.Key
			var ki int
			if keyIndex != nil {
				ki = keyIndex[rk]
			} else {
				ki = slices.Index(keys, rk) + 1
			}
			if ki == 0 {
				keys = append(keys, rk)
				ki = len(keys)
				if keyIndex != nil {
					keyIndex[rk] = ki
				}
			}
			pi := slices.Index(tables, t) + 1
			var sec, ns int64
			if s.cfg.callerTime {
				sec, ns = op.Now/1e9, op.Now%1e9
			}
			args = append(args, int64(op.Kind), int64(ki), int64(pi), sec, ns, op.N)
			args = appendExtra(args, op, t)
		}
	}
	return keys, args
}

// encodeOne writes the arguments of one decision alone, the commonest
// call, in the script's short form (one in lua/batch.lua).
func (s *Store) encodeOne(op *floodgate.Op) (keys []string, args []any) {
	t := op.Table.(*table)
	keys = []string{t.prefix + op.Key}
	if !s.cfg.callerTime {
		return keys, []any{oneServerArg, t.wireArg, op.N}
	}
	return keys, []any{oneCallerArg, s.minTTLArg, t.wireArg, op.N, op.Now / 1e9, op.Now % 1e9}
}

// The first argument of the short form, boxed once.
var oneServerArg, oneCallerArg any = "S", "C"

// appendExtra appends the arguments that follow N for op's kind.
func appendExtra(args []any, op *floodgate.Op, t *table) []any {
	switch op.Kind {
	case floodgate.OpSchedule:
		args = append(args, max(int64(op.MaxWait), 0))
	case floodgate.OpRefund:
		st := op.Stamp
		if st.TAT < 0 || st.Frac < 0 || st.Frac >= t.policy.Limit() {
			st.TAT, st.Frac = 0, t.policy.Limit() // not a bucket's stamp: refunds nothing
		}
		args = append(args, st.At/1e9, st.At%1e9, st.TAT/1e9, st.TAT%1e9, st.Frac)
	}
	return args
}

// refundFields is the most arguments an op takes (a refund's).
const refundFields = 11

// decode sets the ops of calls from the script's reply.
func (s *Store) decode(calls []*call, res any, err error) {
	fail := func(err error) {
		for _, c := range calls {
			c.err = err
		}
	}
	if err != nil {
		if strings.Contains(err.Error(), "floodgate: corrupt") {
			err = fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		fail(fmt.Errorf("redisstore: %w", err))
		return
	}
	reply, _ := res.([]any)
	nops := 0
	for _, c := range calls {
		nops += len(c.ops)
	}
	if len(reply) != 2+opFields*nops {
		fail(fmt.Errorf("redisstore: %w: a reply of %d values for %d ops", ErrCorrupt, len(reply), nops))
		return
	}
	var p replyParser
	serverNow := p.int(reply[0])*1e9 + p.int(reply[1])
	if p.err != nil {
		fail(fmt.Errorf("redisstore: %w: %v", ErrCorrupt, p.err))
		return
	}
	r := reply[2:]
	for _, c := range calls {
		for _, op := range c.ops {
			now := serverNow
			if s.cfg.callerTime {
				now = op.Now
			}
			c.err = errors.Join(c.err, decodeOp(op, now, r[:opFields]))
			r = r[opFields:]
		}
	}
}

// opFields is the number of reply values per op (lua/batch.lua).
const opFields = 7

// decodeOp sets op from its reply values v; now is the time the script
// decided at, in ns (Redis's in server mode).
func decodeOp(op *floodgate.Op, now int64, v []any) error {
	var p replyParser
	code := p.int(v[0])
	d := algo.Decision{Allowed: code == 1, Remaining: p.int(v[1])}
	if retry := p.dur(v[2]); retry == -1 {
		d.RetryAfter = algo.Never
	} else {
		d.RetryAfter = time.Duration(retry)
	}
	d.ResetAfter = time.Duration(p.dur(v[3]))
	atDelta, tatDelta, frac := p.dur(v[4]), p.dur(v[5]), p.int(v[6])
	if p.err != nil {
		return fmt.Errorf("redisstore: %w: %v", ErrCorrupt, p.err)
	}
	op.Err, op.At, op.Stamp, op.Decision = nil, 0, algo.Stamp{}, algo.Decision{}
	if op.Kind != floodgate.OpDecide && op.Kind != floodgate.OpSchedule {
		return nil
	}
	op.Decision = d
	op.At = op.Now + atDelta
	if d.Allowed && op.N > 0 {
		op.Stamp.At = now + atDelta
		if a := op.Table.(*table).policy.Algorithm(); a == algo.TokenBucket || a == algo.LeakyBucket {
			op.Stamp.TAT, op.Stamp.Frac = now+tatDelta, frac
		}
	}
	if code == 2 {
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
