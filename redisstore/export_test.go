package redisstore

import "github.com/floodgate/floodgate/store"

// KeyOf returns the Redis key at which t, a Table of a Store, keeps key.
func KeyOf(t store.Table, key string) string { return t.(*table).prefix + key }
