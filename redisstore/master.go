package redisstore

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// acrossSlots reports whether a script call may carry calls of several
// hash slots of one master: as a Redis Function, whose flag
// allow-cross-slot-keys lets it touch any key its node serves (Redis 7),
// unless a master has refused one (oneSlotOnly).
func (s *Store) acrossSlots() bool {
	return !s.run.noFunc.Load() && !s.oneSlotOnly.Load()
}

// carryOnMaster carries out calls of several hash slots, gathered by the
// batcher of one master of a Redis Cluster, in one script call, and sets
// each call's ops and error: one FCALL a master, not one a slot.
//
// Redis still routes, and checks, the call by its declared keys, which
// must share a slot: the first key is declared, and the others go as
// arguments (lua/batch.lua). The script reads every key before it writes
// any, so when a key is not its node's (a slot that moved, or the
// master's layout stale) the call fails at that read having changed
// nothing, with Redis's error reply: so does every error reply of the
// script's. On such a reply carryOnMaster sends the calls again, a
// script call per slot (carryAcrossSlots), where each slot's calls
// succeed or fail on their own: no op is carried out twice or lost, and
// a slot's failure fails only its own calls. A call that got no reply (a
// master down, a timeout) fails as the per-slot calls to that master
// would have.
func (s *Store) carryOnMaster(ctx context.Context, calls []*call) {
	// Calls of different slots touch different keys, so their order
	// between slots decides nothing; a slot's keep theirs.
	slices.SortStableFunc(calls, func(a, b *call) int { return cmp.Compare(a.Work.slot, b.Work.slot) })
	e := encoders.Get().(*encoder)
	defer func() { e.reset(); encoders.Put(e) }()
	s.encode(e, calls, true)
	res, err := s.run.call(ctx, s.client, e.keys[:1], e.args).Result()
	var reply redis.Error
	if errors.As(err, &reply) {
		if strings.Contains(err.Error(), "do not hash to the same slot") {
			s.oneSlotOnly.Store(true)
		}
		s.carryAcrossSlots(ctx, calls)
		return
	}
	s.decode(calls, res, err)
}
