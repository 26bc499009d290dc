package redisstore

import (
	"context"

	"github.com/floodgate/floodgate/internal/batch"
	"github.com/redis/go-redis/v9"
)

// batcherOf returns the batcher of calls on key, a Redis key: on a Redis
// Cluster, the batcher of the master serving key's slot, made when first
// needed; else, or while the cluster's layout is unknown, s.batcher. So a
// master that is down or stalls holds up only the calls to its own
// slots: never a pipeline or an in-flight script call of calls to the
// others. The batchers are as many as the masters seen.
func (s *Store) batcherOf(ctx context.Context, key string) *batch.Batcher[work] {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return s.batcher
	}
	node, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return s.batcher
	}
	addr := node.Options().Addr
	if b, ok := s.nodes.Load(addr); ok {
		return b.(*batch.Batcher[work])
	}
	b, _ := s.nodes.LoadOrStore(addr, newBatcher(s))
	return b.(*batch.Batcher[work])
}
