// Package memstore is floodgate's default store: the state of every key in
// this process's memory, bounded.
//
// # The model
//
// A Store holds a table per limiter (a name and a policy), each split in
// shards, each shard a map from keys to their states (a compact algo.Cell,
// or an algo.State for a sliding log) under a mutex. Deciding on a key it
// holds takes that one mutex and allocates nothing. Apply locks the shards
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
// Eviction never admits more than the policy: an evicted key's state is
// joined into a small hashed table of the strictest states of evicted keys,
// and a key the store does not hold starts from its entry there. A key that
// returns is no better off than when it was evicted; under a flood of new
// keys, a new key that shares an entry with an evicted one may be denied
// until that state drains, never admitted beyond its policy.
//
// WriteSnapshot and ReadSnapshot carry the states across a restart, in a
// versioned binary format closed by a checksum.
//
// The state lives as long as the process. For limits shared between
// processes, use package filestore or package redisstore.
package memstore
