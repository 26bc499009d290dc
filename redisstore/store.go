package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/batch"
	"github.com/floodgate/floodgate/internal/tablename"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// Store keeps floodgate's state in Redis. Make one with New; it is safe for
// concurrent use, and any number of Stores, in any number of processes,
// may share one Redis.
type Store struct {
	client  redis.UniversalClient
	cluster bool // keys of one script call must share a hash slot
	cfg     config
	batcher *batch.Batcher[work]
	nodes   sync.Map // on a Cluster: a master's *redis.Client -> its *batch.Batcher[work] (batcherOf)
	adder   *batch.Batcher[adds]
	adders  sync.Map // as nodes, of the counters' batchers (adderOf)
	run     runner
	cache   *denyCache // nil without WithDenyCache
	// oneSlotOnly is set once a master has refused a script call across
	// hash slots, the function's flag unheeded (see carryOnMaster).
	oneSlotOnly atomic.Bool

	// The script's first two arguments, boxed once (see encode).
	modeArg, minTTLArg any

	mu     sync.Mutex
	tables map[tableKey]*table
}

type tableKey struct {
	name string
	p    algo.Policy
}

// New returns a Store keeping state in Redis through c: a *redis.Client
// (one server, or Sentinel's failover client) or a *redis.ClusterClient.
// It sends nothing to Redis until the first decision.
func New(c redis.UniversalClient, opts ...Option) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("redisstore: %w: nil client", ErrInvalidOption)
	}
	cfg := defaults()
	for _, o := range opts {
		if err := o.apply(&cfg); err != nil {
			return nil, fmt.Errorf("redisstore: %w", err)
		}
	}
	_, cluster := c.(*redis.ClusterClient)
	s := &Store{client: c, cluster: cluster, cfg: cfg, tables: make(map[tableKey]*table)}
	s.run.client = c
	s.modeArg, s.minTTLArg = "s", cfg.minTTL.Milliseconds()
	if cfg.callerTime {
		s.modeArg = "c"
	}
	s.batcher, s.adder = newBatcher(s, false), newAdder(s, false)
	if _, single := c.(*redis.Client); (single || cluster) && cfg.denyCache > 0 {
		s.cache = newDenyCache(s, cfg.denyCache)
	}
	return s, nil
}

// Client returns the client the store sends its scripts through.
func (s *Store) Client() redis.UniversalClient { return s.client }

// Table implements store.Store. A key K of the limiter named name is
// kept at the Redis key PREFIX + name + ":" + K, with ':', '{', '}', '@'
// and '%' in name escaped as in URLs, and " @ " and the policy after name
// when name is not the policy's own string (the default name).
func (s *Store) Table(name string, p algo.Policy) (store.Table, error) {
	if p.IsZero() {
		return nil, fmt.Errorf("redisstore: %w: the zero Policy", algo.ErrInvalidPolicy)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := tableKey{name, p}
	if t := s.tables[k]; t != nil {
		return t, nil
	}
	t := &table{store: s, name: name, policy: p, prefix: s.cfg.prefix + tablename.Of(name, p) + ":",
		wireArg: fmt.Sprintf("%d %d %d %d", p.Algorithm(), p.Limit(), int64(p.Period()), p.Burst()),
		record:  s.recordKey(name, p)}
	s.tables[k] = t
	return t, nil
}

// table is one limiter's keys.
type table struct {
	store  *Store
	name   string
	policy algo.Policy
	prefix string // Redis key = prefix + key (redisKey)
	// wireArg is the policy as the script reads it, "ALG LIMIT PERIOD
	// BURST", boxed once.
	wireArg any

	// A policy change (policychange.go): record is the Redis key of the
	// record of its name's policies ("" for a default name), and former
	// the tables of its name's other policies, nil until learn read the
	// record (invariant 2), which it does holding learning.
	record   string
	former   atomic.Pointer[[]*table]
	learning sync.Mutex
}

// redisKey returns the Redis key of key in t.
func (t *table) redisKey(key string) string { return t.prefix + key }

// appendRedisKey appends the Redis key of key in t to b: redisKey for a
// lookup that must not allocate.
func (t *table) appendRedisKey(b []byte, key string) []byte {
	return append(append(b, t.prefix...), key...)
}

// Decide implements store.Table: one op, batched with whatever other
// calls are going to Redis at the same moment.
func (t *table) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	op := store.Op{Kind: store.OpDecide, Table: t, Key: key, Now: now, N: n}
	if err := op.Check(&t.policy); err != nil {
		return algo.Decision{}, fmt.Errorf("redisstore: %w", err)
	}
	c := t.store.cache
	if c != nil {
		c.ensure()
		if d, err, ok := c.decide(t, key, now, n); ok {
			return d, err
		}
	}
	err := t.store.do(ctx, []*store.Op{&op}, t.store.slotOf(&op))
	if c != nil {
		c.after(&op, err)
	}
	if err != nil {
		return algo.Decision{}, err
	}
	return op.Result.Decision, op.Result.Err
}

// slotOf returns the hash slot of op's key, a key of a table of s: 0 off a
// Cluster, where the slot does not matter.
func (s *Store) slotOf(op *store.Op) uint16 { return s.keySlot(op.Table.(*table), op.Key) }

// keySlot returns the hash slot of key in t, a table of s (0 off a
// Cluster), without building its Redis key.
func (s *Store) keySlot(t *table, key string) uint16 {
	if !s.cluster {
		return 0
	}
	return slot(t.prefix, key)
}

// policy returns the policy of t, a table of s (store.Check's question).
func (s *Store) policy(t store.Table) (*algo.Policy, bool) {
	rt, ok := t.(*table)
	if !ok || rt.store != s {
		return nil, false
	}
	return &rt.policy, true
}

// checkAll checks ctx and every op before anything is sent.
func (s *Store) checkAll(ctx context.Context, ops []store.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.Check(ops, s.policy); err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	return nil
}

// Apply implements store.Store.
//
// When every op's key is in one hash slot (always, on a single Redis), the
// ops are carried out by one script, atomically: no other client sees a
// state between them. On a Redis Cluster, ops in several slots are carried
// out by one script per slot, at once; when one slot denies, the units
// the others admitted are refunded (algo.Policy.Refund), so that the batch
// never admits more than all-or-nothing would. Meanwhile another client
// may see those units spent for a moment, and be denied for them; and a
// refund or reset in a slot whose script succeeded is not undone. Keys
// that share a hash tag ("{user:42}:upload" and "{user:42}:api") are in
// one slot.
//
// Each slot's script goes through the calls of the slot's master, so an
// Apply whose ops span masters waits for them all, within the store's
// timeout and ctx: when one master is down or stalls, the Apply fails as
// a whole, with that master's error (never store.ErrPartialFailure),
// and the units the other masters admitted are refunded as for a denial;
// the ops of the failed master's slots say so (store.Result.Failure),
// so that a failsafe.Store in front counts the failure against their
// slots alone.
func (s *Store) Apply(ctx context.Context, ops []store.Op) error {
	if err := s.checkAll(ctx, ops); err != nil || len(ops) == 0 {
		return err
	}
	if s.cache == nil {
		return s.apply(ctx, ops)
	}
	s.cache.ensure()
	if len(ops) == 1 && s.cache.answer(&ops[0]) {
		return nil
	}
	s.cache.touched(ops)
	err := s.apply(ctx, ops)
	if len(ops) == 1 {
		s.cache.after(&ops[0], err)
	} else {
		s.cache.touched(ops)
	}
	return err
}

// apply is Apply's, after the cache.
func (s *Store) apply(ctx context.Context, ops []store.Op) error {
	groups := s.groups(ops)
	if len(groups) == 1 {
		return s.do(ctx, groups[0].ops, groups[0].slot)
	}
	return s.applyAcrossSlots(ctx, groups)
}

// ApplyEach implements store.Store: the ops, each decided as if alone,
// go to Redis in calls of up to WithMaxBatch ops of one hash slot, each
// call in a script call with whatever other calls go to Redis at that
// moment. A slot's calls go one after another, so that each op sees the
// effects of the earlier ones on its key. Like every call, it is bounded
// by the store's timeout and ctx.
//
// On a Redis Cluster, each master's share of the ops goes through that
// master's own calls (its slots' calls together, in one script call), the
// masters at once, so that a master that is down or stalls holds up and
// fails only its own share: when some ops fail and others do not,
// ApplyEach returns an error wrapping store.ErrPartialFailure, each
// failed op's Result says so (store.Result.Failure), and the others have
// their decisions.
func (s *Store) ApplyEach(ctx context.Context, ops []store.Op) error {
	if err := s.checkAll(ctx, ops); err != nil || len(ops) == 0 {
		return err
	}
	if s.cache == nil {
		return s.applyEach(ctx, ops)
	}
	s.cache.ensure()
	return s.cache.applyEach(ctx, ops)
}

// applyEach is ApplyEach's, after the cache.
func (s *Store) applyEach(ctx context.Context, ops []store.Op) error {
	bounded, cancel := s.bound(ctx)
	defer cancel()
	for i := range ops {
		if err := ops[i].Table.(*table).learn(bounded); err != nil {
			return err
		}
	}
	// The calls carry out their own copy of the ops, as do's do, the ops
	// of each slot together, in their order.
	order := make([]int, len(ops))
	for i := range order {
		order[i] = i
	}
	if s.cluster {
		slices.SortStableFunc(order, func(i, j int) int { return int(s.slotOf(&ops[i])) - int(s.slotOf(&ops[j])) })
	}
	own := make([]store.Op, len(ops))
	for k, i := range order {
		own[k] = ops[i]
	}
	shares := s.shares(own)
	if len(shares) == 1 {
		s.applyEachInRounds(ctx, bounded, own, &shares[0])
	} else {
		var wg sync.WaitGroup
		for i := range shares[1:] {
			wg.Go(func() { s.applyEachInRounds(ctx, bounded, own, &shares[1+i]) })
		}
		s.applyEachInRounds(ctx, bounded, own, &shares[0])
		wg.Wait()
	}
	return eachResults(ops, order, own, shares)
}

// share is the ops of an ApplyEach that go through one batcher (on a
// Cluster, to one master), by slot, and how far they got.
type share struct {
	b     *batch.Batcher[work]
	slots [][2]int // each slot's ops, own[lo:hi]
	// done is how many ops of each slot were carried out, before err (nil
	// when all were) stopped the share.
	done int
	err  error
}

// shares returns the ops of own, sorted by slot, by batcher (batcherOf),
// in the order of their first slots.
func (s *Store) shares(own []store.Op) []share {
	var shs []share
	for lo := 0; lo < len(own); {
		hi := lo + 1
		for hi < len(own) && s.slotOf(&own[hi]) == s.slotOf(&own[lo]) {
			hi++
		}
		b := s.batcherOf(&own[lo])
		i := slices.IndexFunc(shs, func(sh share) bool { return sh.b == b })
		if i < 0 {
			i = len(shs)
			shs = append(shs, share{b: b})
		}
		shs[i].slots = append(shs[i].slots, [2]int{lo, hi})
		lo = hi
	}
	return shs
}

// applyEachInRounds carries out sh's ops of own in rounds: in each, a
// call of up to WithMaxBatch ops of each of its slots, all at once. It
// stops at the first round that fails, setting sh.err.
func (s *Store) applyEachInRounds(ctx, bounded context.Context, own []store.Op, sh *share) {
	var calls []*call
	for ; ; sh.done += s.cfg.maxBatch {
		calls = calls[:0]
		for _, sl := range sh.slots {
			if lo := sl[0] + sh.done; lo < sl[1] {
				chunk := own[lo:min(lo+s.cfg.maxBatch, sl[1])]
				calls = append(calls, &call{Work: work{ops: chunk, slot: s.slotOf(&chunk[0]), each: true}})
			}
		}
		if len(calls) == 0 {
			return
		}
		if err := sh.b.DoAll(bounded, calls); err != nil {
			sh.err = s.batchErr(ctx, err) // the calls are no longer ours
			return
		}
		if err := s.redo(ctx, bounded, sh.b, calls); err != nil {
			sh.err = err
			return
		}
		for _, c := range calls {
			if c.Err != nil {
				sh.err = s.doneErr(ctx, bounded, c.Err)
				return
			}
		}
	}
}

// eachResults copies the results of own, the ops of ops in the order
// order gives, carried out by shares, to ops, and returns ApplyEach's
// error: the first share's error when every op failed, and one wrapping
// store.ErrPartialFailure when some did. An op of a round that failed
// counts as failed, even if its own call succeeded.
func eachResults(ops []store.Op, order []int, own []store.Op, shares []share) error {
	var first error
	failed := 0
	for i := range shares {
		sh := &shares[i]
		var opErr error
		if sh.err != nil {
			first = cmp.Or(first, sh.err)
			opErr = store.PartialFailure(sh.err)
		}
		for _, sl := range sh.slots {
			for k := sl[0]; k < sl[1]; k++ {
				if sh.err == nil || k < sl[0]+sh.done {
					ops[order[k]].Result = own[k].Result
					continue
				}
				ops[order[k]].Result = store.Result{Err: opErr}
				failed++
			}
		}
	}
	switch failed {
	case 0:
		return nil
	case len(ops):
		return first
	}
	return fmt.Errorf("redisstore: %w: %d of %d ops failed: %w", store.ErrPartialFailure, failed, len(ops), first)
}

// group is the ops of one Apply in one hash slot, in their order.
type group struct {
	slot uint16
	ops  []*store.Op
	err  error
}

func (s *Store) groups(ops []store.Op) []*group {
	var gs []*group
	for i := range ops {
		sl := s.slotOf(&ops[i])
		var g *group
		for _, x := range gs {
			if x.slot == sl {
				g = x
			}
		}
		if g == nil {
			g = &group{slot: sl}
			gs = append(gs, g)
		}
		g.ops = append(g.ops, &ops[i])
	}
	return gs
}

// applyAcrossSlots runs each group's script at once, then refunds what
// the admitting groups spent when another denied or failed.
func (s *Store) applyAcrossSlots(ctx context.Context, gs []*group) error {
	var wg sync.WaitGroup
	for _, g := range gs {
		wg.Go(func() { g.err = s.do(ctx, g.ops, g.slot) })
	}
	wg.Wait()
	var errs []error
	denied := false
	for _, g := range gs {
		if g.err != nil {
			errs = append(errs, g.err)
			for _, op := range g.ops { // which ops failed, for a failsafe.Store in front
				op.Result = store.Result{Err: store.PartialFailure(g.err)}
			}
			continue
		}
		for _, op := range g.ops {
			if (op.Kind == store.OpDecide || op.Kind == store.OpSchedule) && !op.Result.Decision.Allowed {
				denied = true
			}
		}
	}
	if !denied && len(errs) == 0 {
		return nil
	}
	if err := s.refund(context.WithoutCancel(ctx), gs); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// refund gives back the units of the admitted ops of the groups that
// succeeded as a whole.
func (s *Store) refund(ctx context.Context, gs []*group) error {
	var refunds []store.Op
	for _, g := range gs {
		if g.err != nil {
			continue
		}
		admitted := true
		for _, op := range g.ops {
			if (op.Kind == store.OpDecide || op.Kind == store.OpSchedule) && !op.Result.Decision.Allowed {
				admitted = false
			}
		}
		if !admitted {
			continue
		}
		for _, op := range g.ops {
			if r, ok := op.Refund(op.Now); ok {
				refunds = append(refunds, r)
			}
		}
	}
	if len(refunds) == 0 {
		return nil
	}
	rgs := s.groups(refunds)
	var wg sync.WaitGroup
	for _, g := range rgs {
		wg.Go(func() { g.err = s.do(ctx, g.ops, g.slot) })
	}
	wg.Wait()
	var errs []error
	for _, g := range rgs {
		if g.err != nil {
			errs = append(errs, g.err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("redisstore: refunding a denied batch across hash slots: %w", errors.Join(errs...))
	}
	return nil
}

// Clear deletes every key under the store's prefix, and its counters'
// (Counters), on every node of a cluster: for tests and one-off runs, such as the simulator's, that leave
// nothing behind. A store whose prefix starts with this one's loses its
// keys too.
func (s *Store) Clear(ctx context.Context) error {
	clear := func(ctx context.Context, c redis.UniversalClient) error {
		for _, prefix := range []string{s.cfg.prefix, countersPrefix + s.cfg.prefix} {
			if err := clearMatching(ctx, c, globEscaper.Replace(prefix)+"*"); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return clear(ctx, c) })
	} else {
		err = clear(ctx, s.client)
	}
	if err != nil {
		return fmt.Errorf("redisstore: clearing %q: %w", s.cfg.prefix, err)
	}
	return nil
}

// clearMatching deletes the keys of c that match the pattern match.
func clearMatching(ctx context.Context, c redis.UniversalClient, match string) error {
	iter := c.Scan(ctx, 0, match, 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 1000 {
			if err := unlink(ctx, c, batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return unlink(ctx, c, batch)
}

var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// unlink deletes keys, each on its own so that a cluster's keys of many
// slots need no common slot.
func unlink(ctx context.Context, c redis.UniversalClient, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Unlink(ctx, k)
		}
		return nil
	})
	return err
}
