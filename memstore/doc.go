// Package memstore is floodgate's default store: the state of every key in
// this process's memory, bounded.
//
// # The model
//
// A Store holds a table per limiter (a name and a policy), each split in
// shards, each shard a map from keys to their states (a compact algo.Cell,
// or an algo.State for a sliding log or a LIMIT above 2^32-1, see
// algo.Policy.Compact) under a mutex. Deciding on a key it holds takes
// that one mutex, or for most events of a bucket whose T is a whole number
// of nanoseconds none (a compare-and-swap on the key's one word), and
// allocates nothing. Apply locks the shards
// of all its ops' keys in one global order, so batches on any keys never
// deadlock, decides each op with store.Op.Carry, and puts every state back
// when an op is denied.
//
// Memory is bounded two ways. A key whose state has drained (algo
// Policy.ResetAt has passed) decides as a missing key does, so it is
// dropped when next met, which changes no decision. And each table holds
// at most maxKeys keys: to make room for a new one, a full shard evicts,
// from a sample of its keys, the one whose state drains first, and counts
// it in Stats.Evictions. Each shard holds at most its share of maxKeys, so
// evictions can begin slightly before a table as a whole is full.
//
// The store as a whole is bounded in bytes (MaxBytes, DefaultMaxBytes):
// it counts what its tables hold (slot arrays, keys' bytes, sliding logs,
// the tables themselves, each as Go's allocator rounds it) and makes room
// before it allocates: a new key, a shard's growth or a log's growth that
// the bound has no room for evicts keys from its shard first, or goes to
// the shard's shadow (below) when the shard holds none. A table made
// while the bound is nearly reached first frees the tables holding nothing
// that has not drained at the latest time of their own ops (never by
// another table's clock), then folds tables of at most four keys, such as
// Envoy's limit overrides make, into one 16-byte state that the table
// starts from when it is used again; such a record is dropped once it has
// drained at the latest time of the tables of its name. The new table then
// gets one shard rather than 64, and keys of other tables are evicted if
// it still has no room. So the bytes counted never exceed the bound
// (Stats.Bytes <= Stats.MaxBytes) unless the tables' fixed parts alone
// (about 1 KiB a table of one shard) fill it. The count tracks the live
// heap (runtime.MemStats.HeapAlloc) within a few percent; the heap in use
// (HeapInuse, whole spans) is larger under floods of new keys, as each
// evicted key leaves a hole in a span it shared with short-lived strings:
// it grew by up to 2.1 times the bound in the chaos tests, which assert
// 2.5. A
// sliding-log policy whose log could take more than a sixteenth of the
// bound (32 bytes per unit of LIMIT: MaxLogLimit) is refused by Table.
// Stats.Bytes is the count.
//
// Eviction never admits more than the policy: an evicted key's state is
// joined into four slots, picked by its hash, of a table of the strictest
// states of evicted keys (its shard's shadow), and a key the store does
// not hold starts from the loosest of its four. A key that returns is no
// better off than when it was evicted. Under a flood of new keys at their
// whole burst, a new key is denied only when all four of its slots hold a
// flood key's state, until that state drains: a table's shadows have up to
// one slot per key it may hold (up to 1/64 of MaxBytes, all shadows up to
// 1/16), so a flood that evicts a few thousand keys from a table of 2^20
// leaves nearly every new key its whole quota, while one that evicts,
// within a period, about as many keys as the shadows have slots (262,144
// for a table of 2^20 keys at the default MaxBytes) denies most new keys,
// never admitting any beyond its policy. A snapshot holds the keys, not the
// shadows: after a restart, an evicted key starts afresh.
//
// WriteSnapshot and ReadSnapshot carry the states across a restart, in a
// versioned binary format closed by a checksum.
//
// A limiter that keeps its name and changes its policy keeps its keys'
// spent units: a table made under a name whose newest table has another
// policy converts from it, on first use, each key it does not hold
// (algo.Policy.Convert), and leaves the former table's state as it is,
// for a limiter still using it. Across a restart, read the snapshot before
// making the limiters, so that the former tables are there to convert
// from. A key missing from such a table costs a batch of one op (its
// shard and the former table's locked together) until the former table
// drains and is freed; a key it holds costs nothing more.
//
// The state lives as long as the process. For limits shared between
// processes, use package filestore or package redisstore.
package memstore
