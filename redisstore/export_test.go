package redisstore

import (
	"runtime"
	"time"

	"github.com/floodgate/floodgate/store"
)

// KeyOf returns the Redis key at which t, a Table of a Store, keeps key.
func KeyOf(t store.Table, key string) string { return t.(*table).prefix + key }

// WaitFills waits until no fill of s's deny cache is under way.
func WaitFills(s *Store) {
	for s.cache != nil && len(s.cache.fills) > 0 {
		runtime.Gosched()
	}
}

// Cached reports whether s's deny cache holds a state (not a fill under
// way) for key in t.
func Cached(s *Store, t store.Table, key string) bool {
	e := s.cache.idx.get([]byte(KeyOf(t, key)))
	return e != nil && e.until != 0
}

// Hold puts key of t in s's deny cache as a filled initial state, without
// Redis: for measuring the cache's memory.
func Hold(s *Store, t store.Table, key string) {
	c := s.cache
	k := KeyOf(t, key)
	c.mu.Lock()
	c.add(&entry{key: k, t: t.(*table), until: 1 << 62, size: entrySize(k, 0)})
	c.mu.Unlock()
}

// HoldLog puts key of t in s's deny cache as filled with the sliding log
// that h, its Redis hash, holds, as a fill does, without Redis: for
// measuring the cache's memory.
func HoldLog(s *Store, t store.Table, key string, h map[string]string) error {
	st, err := logOf(h)
	if err != nil {
		return err
	}
	c := s.cache
	k := KeyOf(t, key)
	e := &entry{key: k, t: t.(*table), size: entrySize(k, 0)}
	c.mu.Lock()
	c.add(e)
	c.mu.Unlock()
	c.keep(k, e, st, 0, 1<<62)
	return nil
}

// SetRedialAfter makes s's trackers wait to redial on after instead of
// time.After; call it before s's first decision.
func SetRedialAfter(s *Store, after func(time.Duration) <-chan time.Time) {
	s.cache.redialAfter = after
}
