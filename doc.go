// Package floodgate is flood control for Go: rate limits on many keys at
// once (a user, an address, an event name), decided exactly, with state
// in this process's memory or in a store shared by many processes.
//
// # The model
//
// A policy (algo.Policy) says how many units (requests, messages, bytes) a
// key may spend: LIMIT units per PERIOD, under one of five algorithms,
// written as a string that algo.ParsePolicy reads, such as
//
//	token-bucket 100/1m burst=20   GCRA: 100 a minute, bursts of up to 20
//	leaky-bucket 1/1h capacity=20  a meter that holds 20 and drains one an hour
//	sliding-log 5/10s              at most 5 in any 10 seconds, counted exactly
//	sliding-window 1000/1h         about 1000 an hour, from two fixed windows
//	fixed-window 60/1m             at most 60 in each calendar minute
//
// A Limiter applies one policy to every key. Each key has its own state,
// initially a full bucket or an empty window or log. A request on a key
// costs n units (1 by default) and gets a Decision: admitted or not, how
// many units remain, after how long a denied request would be admitted
// (RetryAfter), and after how long the key is back to its initial state
// (ResetAfter). A denial spends nothing. The arithmetic is exact: integer
// nanoseconds, no floating point, no drift, the same answer from every
// store; package algo defines every algorithm to the nanosecond.
//
// # Time
//
// A Limiter reads its clock once per call, at the edge, and passes the time
// down; nothing below it reads a clock. The clock is the system's, made
// monotonic (clock.Real), unless WithClock gives another: tests use a
// clock.Fake and step through fixed instants instead of sleeping. AllowAt
// and AllowEachAt take the time from the caller instead. Time is kept in
// nanoseconds since the Unix epoch, so processes sharing a store agree on
// it.
//
// # Waiting, reserving, several limits
//
// Allow and AllowN refuse a request over the limit. Wait and WaitN make it
// wait its turn instead, first come first served, up to the context's
// deadline or the limiter's maximum wait. Reserve holds units that can be
// given back with Cancel; Schedule holds them for the earliest time they
// fit, without waiting, and says the delay (for a caller that waits
// elsewhere, such as a client of a service). AllowAll checks several limits at once, such as
// a per-user and a global one, and admits only if all of them admit;
// AllowEach checks several independently, in one step of each store (on
// Redis, one round trip for all). WithDryRun makes a limiter report what
// it would deny without denying.
//
// # Stores
//
// A store keeps the keys' states. The default, package memstore, holds
// them in this process with bounded memory: a key whose state has drained
// holds no memory, and each limiter holds at most a set number of keys,
// evicting the state that would drain soonest. A file (package filestore)
// or Redis (package redisstore) shares them between processes, and package
// failsafe keeps deciding when such a store fails. Every store implements
// the contract of package store and proves with package storetest that it
// decides exactly as package algo does.
//
// # Concurrency
//
// Limiters and stores are safe for concurrent use. Every decision on a key
// is atomic: a thousand goroutines on one key at one instant admit exactly
// what the policy allows.
//
// # Versions
//
// Version is the release. CHANGELOG.md lists what each release changed,
// and docs/compatibility.md what a release may change: before v1, a minor
// release may break the API, and says how to upgrade.
package floodgate
