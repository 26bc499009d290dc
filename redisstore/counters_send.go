package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/floodgate/floodgate/internal/batch"
	"github.com/redis/go-redis/v9"
)

// adds is what a call of the counters carries out: its own additions
// (see counters.groups), and then their counts.
type adds struct{ as []addition }

// addCall is one AddEach's additions to one batcher, on their way to
// Redis.
type addCall = batch.Call[adds]

// An addition is one hit of an AddEach, on its way to Redis, then its
// outcome.
type addition struct {
	key   string
	n     int64 // units, at most store.MaxCount
	ttl   int64 // ms: the key's expiry, set when the addition makes it
	slot  uint16
	count int64 // the count after the addition
	err   error // Redis's, or the client's, for this addition alone
}

// newAdder returns a batcher of the counters' calls (package batch, with
// the limits of the decisions' batchers); onMaster says that its calls go
// to one master of a Redis Cluster (adderOf).
func newAdder(s *Store, onMaster bool) *batch.Batcher[adds] {
	send := func(ctx context.Context, calls []*addCall) {
		if calls = batch.Take(calls); len(calls) > 0 {
			s.carryAdds(ctx, calls, onMaster)
		}
	}
	return batch.New(send, s.limits())
}

// adderOf returns the counters' batcher of key's master on a Redis
// Cluster, as batcherOf does the decisions'.
func (s *Store) adderOf(key string) *batch.Batcher[adds] {
	return nodeBatcher(s, &s.adders, key, s.adder, newAdder)
}

// carryAdds carries out calls, and sets each addition's count or error:
// in one call of the counters' function, on a single Redis, for calls of
// one hash slot, and for a master's calls (onMaster) when the master
// allows keys of several slots in one call (see carryOnMaster); else in a
// function call per slot, in one pipeline. An addition whose key the
// master did not serve, or whose slot it refused, failed alone, having
// changed nothing, and goes again in a call of its slot (recount).
func (s *Store) carryAdds(ctx context.Context, calls []*addCall, onMaster bool) {
	var as []*addition
	for _, c := range calls {
		for i := range c.Work.as {
			as = append(as, &c.Work.as[i])
		}
	}
	if s.cluster && !oneSlotAdds(as) && !(onMaster && s.acrossSlots()) {
		s.count(ctx, bySlot(as))
		return
	}
	s.count(ctx, [][]*addition{as})
	if s.cluster {
		s.recount(ctx, as)
	}
}

// oneSlotAdds reports whether as are all in one hash slot.
func oneSlotAdds(as []*addition) bool {
	for _, a := range as[1:] {
		if a.slot != as[0].slot {
			return false
		}
	}
	return true
}

// bySlot returns as by hash slot, in the order of each slot's first.
func bySlot(as []*addition) [][]*addition {
	var gs [][]*addition
	index := map[uint16]int{}
	for _, a := range as {
		i, ok := index[a.slot]
		if !ok {
			i = len(gs)
			index[a.slot] = i
			gs = append(gs, nil)
		}
		gs[i] = append(gs[i], a)
	}
	return gs
}

// recount sends again, a function call per slot, the additions of as that
// failed on a key of a slot that the master does not serve (a layout
// that changed) or that it refused in a call of another slot (an
// allow-cross-slot-keys flag unheeded: then oneSlotOnly, from now on).
func (s *Store) recount(ctx context.Context, as []*addition) {
	var again []*addition
	for _, a := range as {
		if a.err == nil {
			continue
		}
		msg := a.err.Error()
		if strings.Contains(msg, "do not hash to the same slot") {
			s.oneSlotOnly.Store(true)
		} else if !strings.Contains(msg, "non local key") {
			continue
		}
		again = append(again, a)
	}
	if len(again) > 0 {
		s.count(ctx, bySlot(again))
	}
}

// count sends each group of additions in a call of the counters'
// function, the calls in one pipeline (go-redis's, which on a Cluster
// sends each master its own), loading the function where it is missing
// (runner.retry), and sets each addition's count or error.
func (s *Store) count(ctx context.Context, groups [][]*addition) {
	keys, args := make([][]string, len(groups)), make([][]any, len(groups))
	for i, g := range groups {
		keys[i], args[i] = []string{g[0].key}, countArgs(g)
	}
	cmds := make([]*redis.Cmd, len(groups))
	send := func(which []int, call func(redis.Cmdable, []string, []any) *redis.Cmd) {
		if len(which) == 1 {
			cmds[which[0]] = call(s.client, keys[which[0]], args[which[0]])
			return
		}
		_, _ = s.client.Pipelined(ctx, func(p redis.Pipeliner) error { // each command keeps its error
			for _, i := range which {
				cmds[i] = call(p, keys[i], args[i])
			}
			return nil
		})
	}
	all := make([]int, len(groups))
	for i := range all {
		all[i] = i
	}
	send(all, func(c redis.Cmdable, keys []string, args []any) *redis.Cmd {
		return s.run.callAs(countForm, ctx, c, keys, args)
	})
	s.run.retry(ctx, cmds, func(eval bool, which []int) {
		send(which, func(c redis.Cmdable, keys []string, args []any) *redis.Cmd {
			return againAs(countForm, ctx, c, eval, keys, args)
		})
	})
	for i, g := range groups {
		s.decodeCounts(g, cmds[i])
	}
}

// countArgs returns the function's arguments for the additions of g
// (lua/counters.lua): key, units and expiry of each.
func countArgs(g []*addition) []any {
	args := make([]any, 0, 3*len(g))
	for _, a := range g {
		args = append(args, a.key, a.n, a.ttl)
	}
	return args
}

// decodeCounts sets the additions of g from the reply of their call, cmd:
// go-redis reads the function's array as a []any of an int64 (a count) or
// a string (Redis's error for that addition alone) each.
func (s *Store) decodeCounts(g []*addition, cmd *redis.Cmd) {
	fail := func(err error) {
		for _, a := range g {
			a.err = err
		}
	}
	res, err := cmd.Result()
	if err != nil {
		fail(s.callErr(err))
		return
	}
	vs, ok := res.([]any)
	if !ok || len(vs) != len(g) {
		fail(fmt.Errorf("redisstore: %w: the counters' reply %.100v to %d additions (go-redis reads an array as []any)", ErrCorrupt, res, len(g)))
		return
	}
	for i, v := range vs {
		a := g[i]
		switch v := v.(type) {
		case int64:
			a.count, a.err = v, nil
		case string:
			a.err = fmt.Errorf("redisstore: Redis answered the addition to %q: %s", a.key, v)
		default:
			a.err = fmt.Errorf("redisstore: %w: the counters' reply %v (%T) for an addition", ErrCorrupt, v, v)
		}
	}
}
