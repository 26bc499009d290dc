package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/batch"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// call is one group of ops, all in one hash slot, on its way to Redis:
// carried out all or nothing. A script call carries many calls, one after
// another, each as if alone, so that batching changes no decision.
type call = batch.Call[work]

// work is what a call carries out: its own copy of the caller's ops (see
// Store.do), and then their results.
type work struct {
	ops  []store.Op
	slot uint16
	each bool // each op as a call of its own (ApplyEach's)
	// seeds, when not nil, is the SEED of each op that converts, sent
	// again after a policy change's miss (policychange.go).
	seeds [][]byte
}

// newBatcher returns the batcher of s's calls (package batch): calls
// leave together, up to maxBatch in one script call, with at most
// maxInFlight script calls out. onMaster says that its calls go to one
// master of a Redis Cluster (batcherOf), so that their keys of several
// slots may go in one script call (carryOnMaster). With a client that does not heed
// contexts' deadlines, a sender sends even a lone call
// (batch.Limits.Detach), so that its caller can leave when its context or
// the store's timeout ends while the client waits on; a client that heeds
// them (ContextTimeoutEnabled) ends the call itself, and a lone caller
// sends its own call, saving two hand-offs between goroutines.
func newBatcher(s *Store, onMaster bool) *batch.Batcher[work] {
	send := func(ctx context.Context, calls []*call) { s.send(ctx, calls, onMaster) }
	return batch.New(send, s.limits())
}

// limits returns the limits of s's batchers (newBatcher's, and the
// counters', newAdder).
func (s *Store) limits() batch.Limits {
	return batch.Limits{MaxBatch: s.cfg.maxBatch, MaxInFlight: s.cfg.maxInFlight,
		MaxPending: s.cfg.maxPending, Detach: !heedsDeadlines(s.client)}
}

// heedsDeadlines reports whether c ends a command at its context's
// deadline (go-redis's ContextTimeoutEnabled); false for a client it
// cannot tell.
func heedsDeadlines(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// small is a call of up to smallOps ops, pooled, so that a Decide, or
// the Apply of a Reserve or an AllowAll, costs no allocation for its call.
type small struct {
	call
	ops [smallOps]store.Op
}

const smallOps = 4

var smalls = sync.Pool{New: func() any { return new(small) }}

// do carries out ops, all in slot, as one call: on the call's own copy of
// them, whose results it copies back to ops once the call is done. When
// ctx or the store's timeout ends first, do returns at once (see
// batchErr), and the call may still take effect, its results lost.
func (s *Store) do(ctx context.Context, ops []*store.Op, slot uint16) error {
	bounded, cancel := s.bound(ctx)
	defer cancel()
	for _, op := range ops {
		if err := op.Table.(*table).learn(bounded); err != nil {
			return err
		}
	}
	var sm *small
	var c *call
	if len(ops) <= smallOps {
		sm = smalls.Get().(*small)
		c = &sm.call
		c.Work = work{ops: sm.ops[:len(ops)], slot: slot}
	} else {
		c = &call{Work: work{ops: make([]store.Op, len(ops)), slot: slot}}
	}
	for i, op := range ops {
		c.Work.ops[i] = *op
	}
	b := s.batcherOf(ops[0])
	if err := b.Do(bounded, c); err != nil {
		return s.batchErr(ctx, err) // c is no longer ours: the pool goes without it
	}
	if missedAny(c) {
		if err := s.redo(ctx, bounded, b, []*call{c}); err != nil {
			return err
		}
	}
	for i, op := range ops {
		op.Result = c.Work.ops[i].Result
	}
	err := s.doneErr(ctx, bounded, c.Err)
	if sm != nil {
		clear(c.Work.ops)
		c.Work, c.Err = work{}, nil
		smalls.Put(sm)
	}
	return err
}

// doneErr returns the error of a call done with err, whose context was
// ctx, bounded by the store's timeout as bounded: when the client gave up
// on Redis because a deadline passed, as a client that heeds contexts
// does, the error of a caller who left at that deadline.
func (s *Store) doneErr(ctx, bounded context.Context, err error) error {
	if err != nil && errors.Is(err, ErrUnavailable) && errors.Is(bounded.Err(), context.DeadlineExceeded) {
		return s.batchErr(ctx, bounded.Err())
	}
	return err
}

// bound returns ctx, ending at the store's timeout from now unless ctx
// ends sooner.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= s.cfg.timeout {
		return ctx, noCancel
	}
	return context.WithTimeout(ctx, s.cfg.timeout)
}

// noCancel is the CancelFunc of a context that needs none.
var noCancel context.CancelFunc = func() {}

// batchErr returns the error of a call that the batcher did not carry out
// for its caller, whose context is ctx: ErrUnavailable when a deadline
// passed, the caller's or the store's timeout.
func (s *Store) batchErr(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, batch.ErrFull):
		return fmt.Errorf("redisstore: %w (%d)", ErrOverloaded, s.cfg.maxPending)
	case !errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("redisstore: %w", err)
	}
	s.reloadLayout() // Redis did not answer in time: a master may have gone
	if ctx.Err() != nil {
		return fmt.Errorf("redisstore: %w by the caller's deadline: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("redisstore: %w within the store's timeout (%v): %w", ErrUnavailable, s.cfg.timeout, err)
}

// send is a batcher's (newBatcher): it takes the calls whose callers
// still wait, and carries them out.
func (s *Store) send(ctx context.Context, calls []*call, onMaster bool) {
	if calls = batch.Take(calls); len(calls) > 0 {
		s.carry(ctx, calls, onMaster)
	}
}

// carry carries out calls, and sets each call's ops and error: calls of
// one hash slot in one script call; on a Redis Cluster, calls of several
// slots of one master (onMaster) in one script call when the master
// allows it (carryOnMaster), else a script call per slot. The calls are
// carry's alone meanwhile.
func (s *Store) carry(ctx context.Context, calls []*call, onMaster bool) {
	switch {
	case !s.cluster || oneSlot(calls):
		s.carryInSlot(ctx, calls)
	case onMaster && s.acrossSlots():
		s.carryOnMaster(ctx, calls)
	default:
		s.carryAcrossSlots(ctx, calls)
	}
}

// oneSlot reports whether calls are all in one hash slot.
func oneSlot(calls []*call) bool {
	for _, c := range calls[1:] {
		if c.Work.slot != calls[0].Work.slot {
			return false
		}
	}
	return true
}

// carryInSlot carries out calls of one hash slot in one script call.
func (s *Store) carryInSlot(ctx context.Context, calls []*call) {
	e := encoders.Get().(*encoder)
	defer func() { e.reset(); encoders.Put(e) }()
	s.encode(e, calls, false)
	cmd := s.run.call(ctx, s.client, e.keys, e.args)
	if missing(cmd.Err()) {
		cmds := []*redis.Cmd{cmd}
		s.run.retry(ctx, cmds, func(eval bool, _ []int) {
			cmds[0] = s.run.again(ctx, s.client, eval, e.keys, e.args)
		})
		cmd = cmds[0]
	}
	res, err := cmd.Result()
	s.decode(calls, res, err)
}

// carryAcrossSlots carries out calls of several hash slots of a Redis
// Cluster, a script call per slot: where one script call may not carry
// them all (see carry), and again for the calls of one that Redis failed
// (carryOnMaster).
func (s *Store) carryAcrossSlots(ctx context.Context, calls []*call) {
	slots := map[uint16][]*call{}
	var order []uint16
	for _, c := range calls {
		sl := c.Work.slot
		if _, ok := slots[sl]; !ok {
			order = append(order, sl)
		}
		slots[sl] = append(slots[sl], c)
	}
	// Several slots (a Redis Cluster): one pipeline, which go-redis splits
	// by node, with a script call per slot; the slots whose node lacks the
	// script go again in another pipeline (runner.retry).
	cmds := make([]*redis.Cmd, len(order))
	s.pipeline(ctx, order, slots, cmds, s.run.call)
	s.run.retry(ctx, cmds, func(eval bool, which []int) {
		miss := make([]uint16, len(which))
		for k, i := range which {
			miss[k] = order[i]
		}
		again := make([]*redis.Cmd, len(miss))
		s.pipeline(ctx, miss, slots, again, func(ctx context.Context, c redis.Cmdable, keys []string, args []any) *redis.Cmd {
			return s.run.again(ctx, c, eval, keys, args)
		})
		for k, i := range which {
			cmds[i] = again[k]
		}
	})
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
			s.encode(es[i], slots[sl], false)
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
// form (encodeOne). With acrossSlots, calls are sorted by hash slot, and
// the keys follow in the arguments, with how many each slot has (the
// script's form across slots); e.keys holds them too, and the first
// routes the call.
func (s *Store) encode(e *encoder, calls []*call, acrossSlots bool) {
	if ops := calls[0].Work.ops; len(calls) == 1 && len(ops) == 1 && ops[0].Kind == store.OpDecide && calls[0].Work.seeds == nil {
		s.encodeOne(e, &ops[0])
		return
	}
	var seen [4]*table
	tables, nops, ncalls := tablesOf(seen[:0], calls)
	e.args = append(e.args, s.modeArg, s.minTTLArg, int64(len(tables)))
	for _, t := range tables {
		e.args = append(e.args, t.wireArg)
	}
	b := binary.LittleEndian.AppendUint32(e.ops, uint32(ncalls))
	for _, c := range calls {
		b = s.appendCall(e, b, c, tables, nops, acrossSlots)
	}
	e.ops = b
	e.args = append(e.args, b)
	if acrossSlots {
		e.args = append(e.args, e.runs)
		for _, k := range e.keys {
			e.args = append(e.args, k)
		}
	}
}

// appendOp appends op's numbers, after its key and table, to b: its time
// (zeros in server mode, which does not use it), its units, its seed if
// any (a policy change's), and its kind's own (a schedule's wait, a
// refund's stamp).
func (s *Store) appendOp(b []byte, op *store.Op, t *table, seed []byte) []byte {
	var sec, ns int64
	if s.cfg.callerTime {
		sec, ns = op.Now/1e9, op.Now%1e9
	}
	b = append(appendDoubles(b, sec, ns, op.N), seed...)
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
	return b
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
	// runs is how many keys each slot has, one after another, as the
	// script's form across slots packs it; last is the last key's slot.
	runs []byte
	last uint16
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

// countKey counts a new key, of slot, in e.runs: the keys come slot by
// slot.
func (e *encoder) countKey(slot uint16) {
	if n := len(e.runs); n > 0 && e.last == slot {
		binary.LittleEndian.PutUint32(e.runs[n-4:], binary.LittleEndian.Uint32(e.runs[n-4:])+1)
		return
	}
	e.runs = binary.LittleEndian.AppendUint32(e.runs, 1)
	e.last = slot
}

// reset empties e for reuse, dropping what an unusually big call grew.
func (e *encoder) reset() {
	if cap(e.keys) > 4096 {
		*e = encoder{}
		return
	}
	clear(e.keys)
	clear(e.args)
	e.keys, e.args, e.ops, e.runs = e.keys[:0], e.args[:0], e.ops[:0], e.runs[:0]
	clear(e.index)
}

// encodeOne writes the arguments of one decision alone, the commonest
// call, in the script's short form (one in lua/batch.lua).
// tablesOf appends to tables each table of calls' ops once, in order, and
// returns them with the number of ops and of calls as the script counts
// them (each op of an "each" call a call of its own).
func tablesOf(tables []*table, calls []*call) ([]*table, int, int) {
	nops, ncalls := 0, 0
	for _, c := range calls {
		nops += len(c.Work.ops)
		ncalls++
		if c.Work.each {
			ncalls += len(c.Work.ops) - 1
		}
		for i := range c.Work.ops {
			if t := c.Work.ops[i].Table.(*table); !slices.Contains(tables, t) {
				tables = append(tables, t)
			}
		}
	}
	return tables, nops, ncalls
}

// appendCall appends to b the ops of call c, each with its call's length
// where a call starts, its kind (flagged for a conversion), its key's index
// in e and its table's index in tables, and returns b.
func (s *Store) appendCall(e *encoder, b []byte, c *call, tables []*table, nops int, acrossSlots bool) []byte {
	for i := range c.Work.ops {
		switch {
		case c.Work.each:
			b = binary.LittleEndian.AppendUint32(b, 1)
		case i == 0:
			b = binary.LittleEndian.AppendUint32(b, uint32(len(c.Work.ops)))
		}
		op := &c.Work.ops[i]
		t := op.Table.(*table)
		kind, seed := byte(op.Kind), []byte(nil)
		if t.converts(op) {
			kind, seed = flagged(kind, c.Work.seeds, i)
		}
		b = append(b, kind)
		had := len(e.keys)
		b = binary.LittleEndian.AppendUint32(b, uint32(e.keyIndex(t.redisKey(op.Key), nops)))
		if acrossSlots && len(e.keys) > had {
			e.countKey(c.Work.slot)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(slices.Index(tables, t)+1))
		b = s.appendOp(b, op, t, seed)
	}
	return b
}

// encodeOne encodes a lone decision in the short form, which the script
// decides without tables.
func (s *Store) encodeOne(e *encoder, op *store.Op) {
	t := op.Table.(*table)
	e.keys = append(e.keys, t.redisKey(op.Key))
	if !s.cfg.callerTime {
		e.args = append(e.args, oneServerArg, t.wireArg, op.N)
	} else {
		e.args = append(e.args, oneCallerArg, s.minTTLArg, t.wireArg, op.N, op.Now/1e9, op.Now%1e9)
	}
	if t.converts(op) {
		e.args = append(e.args, oneConvertArg)
	}
}

// The first argument of the short form, and its last for a policy
// change's CONVERT flag, boxed once.
var oneServerArg, oneCallerArg, oneConvertArg any = "S", "C", "M"

// decode sets the ops of calls from the script's reply.
func (s *Store) decode(calls []*call, res any, err error) {
	fail := func(err error) {
		for _, c := range calls {
			c.Err = err
		}
	}
	if err != nil && strings.Contains(err.Error(), "floodgate: corrupt") {
		fail(fmt.Errorf("redisstore: %w: %w", ErrCorrupt, err))
		return
	} else if err != nil {
		fail(s.callErr(err))
		return
	}
	nops := 0
	for _, c := range calls {
		nops += len(c.Work.ops)
	}
	reply, _ := res.(string)
	r, err := newReplyReader(reply, 2+opFields*nops)
	if err != nil {
		fail(fmt.Errorf("redisstore: %w: %d ops: %w", ErrCorrupt, nops, err))
		return
	}
	serverNow := r.next()*1e9 + r.next()
	for _, c := range calls {
		for j := range c.Work.ops {
			op := &c.Work.ops[j]
			now := serverNow
			if s.cfg.callerTime {
				now = op.Now
			}
			var v [opFields]int64
			for i := range v {
				v[i] = r.next()
			}
			if r.err != nil {
				c.Err = errors.Join(c.Err, fmt.Errorf("redisstore: %w: %w", ErrCorrupt, r.err))
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
	if code == codeMissed {
		op.Result = store.Result{Err: errMissed, At: now}
		return
	}
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
