package redisstore

import (
	"runtime"

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
