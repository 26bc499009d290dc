package redisstore

import (
	"context"
	"sync"

	"github.com/floodgate/floodgate/internal/batch"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// batcherOf returns the batcher of a call whose first op is op: on a
// Redis Cluster, the batcher of the master serving the slot of op's key, made when first
// needed; else, or while the cluster's layout is unknown, s.batcher. So a
// master that is down or stalls holds up only the calls to its own
// slots: never a pipeline or an in-flight script call of calls to the
// others. The batchers are as many as the masters' clients seen. The
// master is looked up in the layout go-redis holds (cachedLayout); while
// it holds none, the call goes to s.batcher, whose send loads it.
func (s *Store) batcherOf(op *store.Op) *batch.Batcher[work] {
	return nodeBatcher(s, &s.nodes, op.Table.(*table).redisKey(op.Key), s.batcher, newBatcher)
}

// nodeBatcher returns the batcher, in nodes, of the master serving the
// slot of key on a Redis Cluster, made by newOne(s, true) when first
// needed; else, or while the cluster's layout is unknown, whole, the
// batcher of the whole store (see batcherOf).
func nodeBatcher[T any](s *Store, nodes *sync.Map, key string, whole *batch.Batcher[T],
	newOne func(*Store, bool) *batch.Batcher[T]) *batch.Batcher[T] {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return whole
	}
	node, err := cc.MasterForKey(cachedLayout, key)
	if err != nil {
		return whole
	}
	// go-redis keeps one client a node address, so the client names the
	// master (and, a pointer, costs no allocation as a map key).
	if b, ok := nodes.Load(node); ok {
		return b.(*batch.Batcher[T])
	}
	b, _ := nodes.LoadOrStore(node, newOne(s, true))
	return b.(*batch.Batcher[T])
}

// cachedLayout is the context of a master's lookup: done already, so that
// go-redis answers from the cluster's layout it holds (it reads the
// context only to load one) and never makes a caller wait for a load
// that may take the caller's whole budget (a master's address that does
// not resolve, say). TestGoRedisMasterForKeyReadsLayoutHeld pins that
// go-redis behaviour.
var cachedLayout = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// reloadLayout asks go-redis, on a Redis Cluster, to load the cluster's
// layout again, after a call that Redis did not answer, or not in time (a
// dial error, a connection lost, a deadline): when a replica has taken
// over the slots of a master that died, the store looks the new master
// up at once (batcherOf reads the layout held, cachedLayout), not after
// go-redis's next periodic load (ClusterStateReloadInterval, a minute by
// default); go-redis loads a layout by itself only then and on a MOVED
// reply, which a dead master never sends. go-redis loads it in the
// background, one load at a time, 200 ms apart, so a master down costs a
// few loads a second however many calls fail
// (TestGoRedisReloadStateCoalesces).
func (s *Store) reloadLayout() {
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
}
