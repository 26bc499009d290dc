package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// batcher sends calls to Redis, many in one script call when they arrive
// together. A call is a group of ops in one hash slot, carried out all or
// nothing; the groups of one script call are carried out one after
// another, each as if alone, so batching changes no decision.
//
// A call that finds no script call out and none waiting goes at once,
// from its own goroutine. Calls that arrive meanwhile wait in pending, and
// a sender takes up to maxBatch of them, with at most maxInFlight senders
// at once. Senders other than a lone caller run in a goroutine of their
// own, which sends until pending is empty and then ends: the store starts
// no goroutine that outlives the calls it serves.
type batcher struct {
	store       *Store
	maxBatch    int
	maxInFlight int
	maxPending  int

	mu       sync.Mutex
	pending  []*call
	inFlight int          // senders
	out      atomic.Int32 // script calls on their way, of all senders
}

type call struct {
	ops  []*store.Op
	slot uint16
	ctx  context.Context
	err  error
	done chan struct{} // made when the call waits, unless given
	left bool          // the caller left before the call was done
}

// do carries out ops, all in slot, and returns when they are done or ctx
// is. A call whose context ends while its script is out may still take
// effect.
func (b *batcher) do(ctx context.Context, ops []*store.Op, slot uint16) error {
	return b.submit(&call{ops: ops, slot: slot, ctx: ctx})
}

// single is a call of one op, made with one allocation and reused, its
// done channel with it.
type single struct {
	call
	op  store.Op
	ops [1]*store.Op
}

var singles = sync.Pool{New: func() any { return &single{call: call{done: make(chan struct{}, 1)}} }}

// decide carries out op alone (see do).
func (b *batcher) decide(ctx context.Context, op store.Op, slot uint16) (store.Op, error) {
	c := singles.Get().(*single)
	c.op = op
	c.ops[0] = &c.op
	c.call = call{ops: c.ops[:], slot: slot, ctx: ctx, done: c.done}
	err := b.submit(&c.call)
	if c.left {
		// A sender may still be writing c: leave it to the collector.
		return op, err
	}
	// Done with c: no sender holds it.
	op = c.op
	*c = single{call: call{done: c.done}}
	singles.Put(c)
	return op, err
}

// submit carries out c (see do).
func (b *batcher) submit(c *call) error {
	ctx := c.ctx
	b.mu.Lock()
	if b.inFlight == 0 && len(b.pending) == 0 {
		// Alone: send from this goroutine, with the caller's context.
		b.inFlight++
		b.mu.Unlock()
		b.send(ctx, []*call{c})
		b.finish()
		return c.err
	}
	if len(b.pending) >= b.maxPending {
		b.mu.Unlock()
		return fmt.Errorf("redisstore: %w (%d)", ErrOverloaded, b.maxPending)
	}
	if c.done == nil {
		c.done = make(chan struct{}, 1)
	}
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
		c.left = true
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
	b.gather()
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
		b.send(ctx, batch)
		cancel()
		for _, c := range batch {
			c.done <- struct{}{}
		}
		b.gather()
	}
}

// send carries out calls, counted out meanwhile.
func (b *batcher) send(ctx context.Context, calls []*call) {
	b.out.Add(1)
	defer b.out.Add(-1)
	b.store.send(ctx, calls)
}

// maxYields bounds gather's yields.
const maxYields = 8

// gather waits for calls about to arrive before a sender takes its batch,
// while Redis is busy with another sender's script call and waiting costs
// no time there: the callers that a sender has just woken, or that found
// a call out, usually call again at once, and their calls then go in this
// batch, not in the next. It yields the processor for as long as each
// yield brings new calls and another script call is out, at most
// maxYields times, and stops once a batch is full. Fewer, larger script
// calls cost Redis and the client less for each decision, so many
// concurrent callers get more decisions per second (the README's "On
// Redis" has the figures).
func (b *batcher) gather() {
	n := b.pendingLen()
	for range maxYields {
		if b.out.Load() == 0 {
			return // Redis has nothing to do: send now.
		}
		runtime.Gosched()
		m := b.pendingLen()
		if m == n || m >= b.maxBatch {
			return
		}
		n = m
	}
}

func (b *batcher) pendingLen() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
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
		e := encoders.Get().(*encoder)
		defer func() { e.reset(); encoders.Put(e) }()
		s.encode(e, calls)
		cmd := s.run.call(ctx, s.client, e.keys, e.args)
		if missing(cmd.Err()) {
			eval, err := s.run.load(ctx)
			if err != nil {
				s.decode(calls, nil, err)
				return
			}
			cmd = s.run.again(ctx, s.client, eval, e.keys, e.args)
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
	// Each command carries its own error, which decode reports. The
	// encoders are in use until the pipeline is done.
	es := make([]*encoder, len(order))
	_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, sl := range order {
			es[i] = encoders.Get().(*encoder)
			s.encode(es[i], slots[sl])
			cmds[i] = run(ctx, p, es[i].keys, es[i].args)
		}
		return nil
	})
	for _, e := range es {
		e.reset()
		encoders.Put(e)
	}
}

// encode writes the script's keys and arguments for calls (lua/batch.lua)
// into e. The policies come first in the arguments, so a first pass finds
// them; the ops follow, packed in one string. In server mode the ops'
// times, unused, go as zeros. A lone decision goes in the script's short
// form (encodeOne).
func (s *Store) encode(e *encoder, calls []*call) {
	if len(calls) == 1 && len(calls[0].ops) == 1 && calls[0].ops[0].Kind == store.OpDecide {
		s.encodeOne(e, calls[0].ops[0])
		return
	}
	var seen [4]*table
	tables := seen[:0]
	nops := 0
	for _, c := range calls {
		nops += len(c.ops)
		for _, op := range c.ops {
			if t := op.Table.(*table); !slices.Contains(tables, t) {
				tables = append(tables, t)
			}
		}
	}
	e.args = append(e.args, s.modeArg, s.minTTLArg, int64(len(tables)))
	for _, t := range tables {
		e.args = append(e.args, t.wireArg)
	}
	b := binary.LittleEndian.AppendUint32(e.ops, uint32(len(calls)))
	for _, c := range calls {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(c.ops)))
		for _, op := range c.ops {
			t := op.Table.(*table)
			var sec, ns int64
			if s.cfg.callerTime {
				sec, ns = op.Now/1e9, op.Now%1e9
			}
			b = append(b, byte(op.Kind))
			b = binary.LittleEndian.AppendUint32(b, uint32(e.keyIndex(t.prefix+op.Key, nops)))
			b = binary.LittleEndian.AppendUint32(b, uint32(slices.Index(tables, t)+1))
			b = appendDoubles(b, sec, ns, op.N)
			switch op.Kind {
			case store.OpSchedule:
				b = append(strconv.AppendInt(b, max(int64(op.MaxWait), 0), 10), 0)
			case store.OpRefund:
				st := op.Stamp
				if st.TAT < 0 || st.Frac < 0 || st.Frac >= t.policy.Limit() {
					st.TAT, st.Frac = 0, t.policy.Limit() // not a bucket's stamp: refunds nothing
				}
				b = appendDoubles(b, st.At/1e9, st.At%1e9, st.TAT/1e9, st.TAT%1e9, st.Frac)
			}
		}
	}
	e.ops = b
	e.args = append(e.args, b)
}

// appendDoubles appends vs to b as little-endian doubles, which hold them
// exactly below 2^53, as the script's numbers do.
func appendDoubles(b []byte, vs ...int64) []byte {
	for _, v := range vs {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(v)))
	}
	return b
}

// An encoder holds one script call's keys and arguments, and is reused:
// Store.send takes one from encoders and puts it back once the call is
// done.
type encoder struct {
	keys  []string
	args  []any
	ops   []byte
	index map[string]int // key -> its index in keys, for many keys
}

var encoders = sync.Pool{New: func() any { return new(encoder) }}

// keyIndex returns key's index in e.keys, from 1, adding it when new. A
// call of up to 8 ops searches the keys; more use a map.
func (e *encoder) keyIndex(key string, nops int) int {
	if nops <= 8 {
		if i := slices.Index(e.keys, key); i >= 0 {
			return i + 1
		}
		e.keys = append(e.keys, key)
		return len(e.keys)
	}
	if e.index == nil {
		e.index = make(map[string]int, nops)
	}
	i, ok := e.index[key]
	if !ok {
		e.keys = append(e.keys, key)
		i = len(e.keys)
		e.index[key] = i
	}
	return i
}

// reset empties e for reuse, dropping what an unusually big call grew.
func (e *encoder) reset() {
	if cap(e.keys) > 4096 {
		*e = encoder{}
		return
	}
	clear(e.keys)
	clear(e.args)
	e.keys, e.args, e.ops = e.keys[:0], e.args[:0], e.ops[:0]
	clear(e.index)
}

// encodeOne writes the arguments of one decision alone, the commonest
// call, in the script's short form (one in lua/batch.lua).
func (s *Store) encodeOne(e *encoder, op *store.Op) {
	t := op.Table.(*table)
	e.keys = append(e.keys, t.prefix+op.Key)
	if !s.cfg.callerTime {
		e.args = append(e.args, oneServerArg, t.wireArg, op.N)
		return
	}
	e.args = append(e.args, oneCallerArg, s.minTTLArg, t.wireArg, op.N, op.Now/1e9, op.Now%1e9)
}

// The first argument of the short form, boxed once.
var oneServerArg, oneCallerArg any = "S", "C"

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
	nops := 0
	for _, c := range calls {
		nops += len(c.ops)
	}
	reply, _ := res.(string)
	r, err := newReplyReader(reply, 2+opFields*nops)
	if err != nil {
		fail(fmt.Errorf("redisstore: %w: %d ops: %w", ErrCorrupt, nops, err))
		return
	}
	serverNow := r.next()*1e9 + r.next()
	for _, c := range calls {
		for _, op := range c.ops {
			now := serverNow
			if s.cfg.callerTime {
				now = op.Now
			}
			var v [opFields]int64
			for i := range v {
				v[i] = r.next()
			}
			if r.err != nil {
				c.err = errors.Join(c.err, fmt.Errorf("redisstore: %w: %w", ErrCorrupt, r.err))
				continue
			}
			decodeOp(op, now, &v)
		}
	}
}

// opFields is the number of reply values per op (lua/batch.lua).
const opFields = 7

// decodeOp sets op from its reply values v; now is the time the script
// decided at, in ns (Redis's in server mode).
func decodeOp(op *store.Op, now int64, v *[opFields]int64) {
	code := v[0]
	d := algo.Decision{Allowed: code == 1, Remaining: v[1]}
	if v[2] == -1 {
		d.RetryAfter = algo.Never
	} else {
		d.RetryAfter = time.Duration(v[2])
	}
	d.ResetAfter = time.Duration(v[3])
	atDelta, tatDelta, frac := v[4], v[5], v[6]
	op.Result = store.Result{}
	if op.Kind != store.OpDecide && op.Kind != store.OpSchedule {
		return
	}
	op.Result.Decision = d
	op.Result.At = op.Now + atDelta
	if d.Allowed && op.N > 0 {
		op.Result.Stamp.At = now + atDelta
		if a := op.Table.(*table).policy.Algorithm(); a == algo.TokenBucket || a == algo.LeakyBucket {
			op.Result.Stamp.TAT, op.Result.Stamp.Frac = now+tatDelta, frac
		}
	}
	if code == 2 {
		burst := op.Table.(*table).policy.Burst()
		op.Result.Err = fmt.Errorf("redisstore: %w: cost %d, burst %d", algo.ErrCostExceedsBurst, op.N, burst)
	}
}

// replyReader reads the script's reply (lua/batch.lua): little-endian
// doubles, each an integer, then decimal numbers for the values a double
// cannot hold. It remembers the first problem.
type replyReader struct {
	doubles string
	bigs    string
	err     error
}

// newReplyReader reads reply, of n values.
func newReplyReader(reply string, n int) (*replyReader, error) {
	if len(reply) < 8*n {
		return nil, fmt.Errorf("a reply of %d bytes where %d values belong", len(reply), n)
	}
	return &replyReader{doubles: reply[:8*n], bigs: reply[8*n:]}, nil
}

// maxExact is the largest integer below which every integer is a double.
const maxExact = 1 << 53

func (r *replyReader) next() int64 {
	if len(r.doubles) < 8 {
		r.fail(errors.New("the reply ends early"))
		return 0
	}
	b := r.doubles
	f := math.Float64frombits(uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56)
	r.doubles = b[8:]
	switch {
	case f == -2:
		var num string
		num, r.bigs, _ = strings.Cut(r.bigs, " ")
		i, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			r.fail(fmt.Errorf("a duration past 2^53: %w", err))
		}
		return i
	case f != math.Trunc(f) || f < -maxExact || f > maxExact:
		r.fail(fmt.Errorf("%v where an integer belongs", f))
		return 0
	}
	return int64(f)
}

func (r *replyReader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}
