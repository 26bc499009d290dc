package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// trackerFor returns the tracker that vouches for the Redis key k: off a
// Cluster the cache's one tracker; on a Cluster that of the master that
// serves k's slot in the layout go-redis holds, started when first
// needed, or nil while the layout is unknown or the cache is closed.
func (c *denyCache) trackerFor(k string) *tracker {
	cc, ok := c.s.client.(*redis.ClusterClient)
	if !ok {
		return c.tr.Load()
	}
	master, err := cc.MasterForKey(cachedLayout, k)
	if err != nil {
		return nil
	}
	return c.trackerOf(master)
}

// trackerOf returns the tracker of master, a Cluster's master, starting
// it if it has none: nil once the cache is closed.
func (c *denyCache) trackerOf(master *redis.Client) *tracker {
	c.trMu.Lock()
	defer c.trMu.Unlock()
	if c.closed {
		return nil
	}
	tr := c.trackers[master]
	if tr == nil {
		if c.trackers == nil {
			c.trackers = make(map[*redis.Client]*tracker)
		}
		tr = newTracker(c, master)
		c.trackers[master] = tr
		tr.start()
	}
	return tr
}

// owns reports whether tr still vouches for the Redis key k: on a
// Cluster, whether go-redis's layout still names tr's master as the
// master of k's slot. A slot that moved (a failover, a resharding, seen
// by go-redis on a MOVED reply or a reload of its layout) is so never
// answered from an entry that another master's invalidations kept.
func (c *denyCache) owns(tr *tracker, k []byte) bool {
	cc, ok := c.s.client.(*redis.ClusterClient)
	if !ok {
		return true
	}
	master, err := cc.MasterForKey(cachedLayout, string(k))
	return err == nil && master == tr.client
}

// all returns the cache's trackers.
func (c *denyCache) all() []*tracker {
	if tr := c.tr.Load(); tr != nil {
		return []*tracker{tr}
	}
	c.trMu.Lock()
	defer c.trMu.Unlock()
	trs := make([]*tracker, 0, len(c.trackers))
	for _, tr := range c.trackers {
		trs = append(trs, tr)
	}
	return trs
}

// isLive reports whether every tracker, of which there is at least one,
// is live.
func (c *denyCache) isLive() bool {
	trs := c.all()
	for _, tr := range trs {
		if !tr.isLive(c.mono()) {
			return false
		}
	}
	return len(trs) > 0
}

// err returns why a tracker that is not live is not, the first one known.
func (c *denyCache) err() error {
	for _, tr := range c.all() {
		if e := tr.err.Load(); e != nil && !tr.isLive(c.mono()) {
			return *e
		}
	}
	return nil
}

// Sync waits until the store's deny cache has applied every invalidation
// of a write that Redis carried out before the call: for tests that
// write in one process and decide in another. On a Cluster it first
// starts the tracking connection of every master it lacks one for. It
// returns at once for a store without a cache, and an error while a
// tracking connection is down.
func (s *Store) Sync(ctx context.Context) error {
	c := s.cache
	if c == nil {
		return nil
	}
	c.ensure()
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
			if c.trackerOf(m) == nil {
				return errClosed
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	for _, tr := range c.all() {
		if err := tr.sync(ctx); err != nil {
			return err
		}
	}
	return nil
}

var errClosed = errors.New("redisstore: the store is closed")

// Close stops the store's deny cache, if it has one, and its tracking
// connections; it does not close the client. A store without a cache
// needs no Close.
func (s *Store) Close() error {
	c := s.cache
	if c == nil {
		return nil
	}
	c.ensure()
	c.trMu.Lock()
	c.closed = true
	c.trMu.Unlock()
	for _, tr := range c.all() {
		tr.close()
		c.flush(tr, false)
	}
	return nil
}
