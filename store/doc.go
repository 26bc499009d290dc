// Package store is the contract between floodgate's limiters and the
// stores that keep their state: the memory store (package memstore), a
// file (filestore), Redis (redisstore), and wrappers such as package
// failsafe. It is for those who write or wrap a store; a user of
// floodgate.Limiter needs none of it.
//
// # The model
//
// A Store holds tables, one for each limiter (a name and an algo.Policy),
// and each table holds the state of many keys (algo.State), initially the
// policy's initial state. Two limiters with the same name and policy share
// a table: in this process and, for a store shared over the network or a
// file, in every process using it.
//
// A table of a name that the store holds under another policy is that
// limiter's policy changed (a deploy raising 100/h to 200/h): a store
// that carries state across the change starts each key the new table does
// not hold from its state under the former policy, converted
// (algo.Policy.Convert), so that spent units stay spent. The memory, file
// and Redis stores do (storetest.PolicyChange checks it).
//
// A store changes a key's state only by the transitions of package algo:
// an Op decides units at a time (OpDecide, algo.Policy.Decide), schedules
// them for later (OpSchedule, algo.Policy.Schedule), gives back units it
// admitted (OpRefund, algo.Policy.Refund) or forgets the key (OpReset).
// Op.Carry is that transition on one state, the same for every store.
//
// Store.Apply carries out a batch of ops all or nothing, as one atomic
// step: a per-user and a global limit checked together, or a reservation
// and its refund. Store.ApplyEach carries out many independent ops, each
// as if alone, in one step where the store can (one script call on
// Redis, one transaction on a file): the descriptors of an Envoy request.
// Table.Decide is the fast path of an Apply of one OpDecide; a store in
// this process's memory, which a batch saves nothing, says so by being
// Local.
//
// Counters count hits in fixed windows, every hit, with no limit: Envoy's
// rate limit counters. A store that keeps them more cheaply than a table
// (Redis: INCRBY) is Counting; CountersOf gives any store's, on a table
// (TableCounters) when the store is not.
//
// # Duties of a store
//
// A Store must decide exactly as package algo would on the key's state, at
// the time the op gives (or, where a store documents it, its own clock);
// package storetest holds the conformance suite that proves it. It must be
// safe for concurrent use, every operation on a key atomic. Bad input (an
// op that Check refuses, a table of another store) is an error and changes
// nothing; a denial is not an error. A key's state may be dropped once it
// has drained (algo.Policy.ResetAt), which changes no decision.
//
// A store whose keys are spread over partitions that fail apart
// (Partitioned) carries out an ApplyEach's ops in the partitions that
// work even while another fails, and reports the ops it failed on, each
// in its Result, with an error wrapping ErrPartialFailure; an Apply, all
// or nothing, fails as a whole.
//
// A call returns when its context ends, with the context's error, even
// while its ops are on their way; they may then still take effect (Apply
// says how). Once a call has returned, the store reads and writes its ops
// no more: a store that carries them out elsewhere, after its caller has
// gone, works on a copy of its own.
package store
