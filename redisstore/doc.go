// Package redisstore keeps floodgate's state in Redis, so that every
// instance of a service shares its limits: a single Redis, Redis Sentinel
// (through go-redis's failover client) or a Redis Cluster, through the
// caller's own github.com/redis/go-redis/v9 client.
//
//	s, err := redisstore.New(client) // a *redis.Client or *redis.ClusterClient
//	l, err := floodgate.NewLimiter(policy, floodgate.WithStore(s))
//
// # Decisions
//
// Every decision is made inside Redis by one Lua script, atomically, and
// is exactly the decision of package algo (and so of the memory store) for
// every algorithm: the store passes floodgate's conformance suite
// (package storetest), and a differential test replays random traces
// through memory and Redis and demands identical decisions, remaining
// units, waits and stamps. Lua's numbers are doubles, exact only below
// 2^53, while algo computes in 128-bit integers (a count up to 10^15 times
// a time in nanoseconds up to 2^63). The script holds counts as doubles
// (at most 2*10^15, exact) and times as pairs of doubles (seconds and
// nanoseconds). No decision loses exactness anywhere within algo's
// bounds; what it costs Redis depends on the path it takes.
//
// # Fast and slow paths
//
// A bucket's time is counted in units of 1/LIMIT ns, and tau = burst *
// PERIOD units (see algo).
//
//   - token-bucket and leaky-bucket with LIMIT and burst (capacity) at
//     most 2^32, whatever the period (up to 366 days): always a fast path.
//     Doubles relative to now when tau is at most 2^50 units (100/1h,
//     13/24h) and the state is within weeks of now; otherwise triples of
//     doubles (seconds, nanoseconds, units), at about the same cost: every
//     per-day, per-week, per-month or per-year quota (1000/24h, 10000/1h,
//     14/24h, 1000/720h), and a clock that stepped back.
//   - token-bucket and leaky-bucket past 2^32 (byte rates of gigabytes):
//     doubles when tau is at most 2^50 units and the state near, else big
//     integers of six limbs, several times slower.
//   - fixed-window: doubles when PERIOD is at most 2^50 ns (about 13
//     days), else, or for a window weeks ahead of now, pairs of doubles
//     when PERIOD is a whole number of seconds (a month's quota, a
//     year's); big integers for a longer PERIOD with a fraction of a
//     second.
//   - sliding-log: always a fast path: its times are pairs of doubles
//     (seconds, nanoseconds), whatever the period and the entries'
//     distance from now.
//   - sliding-window: doubles when LIMIT * PERIOD is at most 2^50 (100/1h),
//     or when LIMIT is at most 2^32 and PERIOD at most 52 days (1000/24h,
//     10000/1h, a month's quota), whatever the state (a window weeks ahead
//     of a clock that stepped back): a product of a count and a time, past
//     2^53, is compared through floor(k*PERIOD/w), exact in doubles.
//     Else big integers (a sliding window of 366 days, or of LIMIT 10^15).
//   - A refund: big integers.
//
// # Functions and scripts
//
// The Lua code reaches Redis 7 and later as a Redis Function library
// (FUNCTION LOAD, then FCALL), loaded by the store the first time it is
// missing and again whenever a node lacks it (a FUNCTION FLUSH, a new
// cluster master): its code is compiled and set up once, not on every
// call. A Redis before 7, or a user whom an ACL denies functions, gets the
// same code as a script (EVALSHA, then EVAL when the script cache lacks
// it). The library is named after a hash of the code, so processes of
// different floodgate versions on one Redis each run their own. Both forms
// decide alike, on the same keys. A call that finds the code missing did
// not run, so the store loads the code and sends the call again, as long
// as the call's deadline allows and up to 4 loads; a call that finds it
// missing after each (the code flushed again and again) fails with
// ErrUnavailable, not carried out. No call is carried out twice. On a
// Redis Cluster the store loads the code only on the masters whose calls
// found it missing, one load at a time on each; a call waits only for its
// own master's load, and no longer than its deadline, so a master down or
// stalled holds up no load on the others.
//
// # Time
//
// By default the script reads Redis's clock (TIME, to the microsecond), so
// that instances whose clocks disagree still agree on every decision;
// Decision durations are measured from that time, and the instants the
// store reports to its caller (Op.At) are translated to the caller's
// clock. WithCallerTime decides at the caller's time instead, for tests
// with a fake clock and for replaying traces (floodgate simulate).
//
// # Keys
//
// Key K of a limiter named NAME lives at the Redis key PREFIX + NAME + ":"
// + K (see Store.Table for escaping): for the bucket and window
// algorithms a string of 33 bytes, the algorithm as a byte and then four
// little-endian doubles, each an integer (T's seconds and nanoseconds, X,
// Y: lua/batch.lua says what they hold), which the script packs and
// unpacks in C; for sliding-log a hash of entries. A key
// expires exactly when its state has drained (algo.Policy.ResetAt): with
// Redis's clock, at that instant (PXAT, rounded up to the millisecond);
// with the caller's, that long after its last write. No key is left over.
// The keys under the prefix are the store's: a string there that the
// store did not write is an error wrapping ErrCorrupt, and a key of
// another type where a bucket's or window's string belongs is replaced.
//
// # Counters
//
// The store is a store.Counting: its counters (Store.Counters) count hits
// in fixed windows, each an integer at a Redis key naming the window's
// index, "#" and the prefix first: outside the prefix that a deny cache
// tracks, so that a write costs Redis no invalidation. WithCounters(false)
// turns them off; store.CountersOf then counts on the store's tables,
// through the decisions' script.
//
// An addition is an INCRBY in the counters' function (lua/counters.lua),
// and, when the INCRBY made the key, its PEXPIRE, in the same call: a key
// never stays without its expiry. An INCRBY in Lua costs Redis less than
// one sent alone (no command to parse, no reply to frame), and the
// additions of calls that arrive together go in one function call, as
// the decisions' calls do (package batch): a call is bounded by the
// store's timeout and its context as every call is. On a Cluster the
// additions go, as the decisions do, in one call a master (its slots
// together); an addition whose key that master does not serve (a slot
// that moved) fails alone, having changed nothing, and goes again in a
// call of its own slot. An addition that Redis refuses (a key of another
// type) fails alone: AddEach returns store.ErrPartialFailure.
//
// The window is the one holding the caller's time, with or without
// WithCallerTime, never Redis's: every process names the window its own
// clock is in, and processes whose clocks disagree by d count near a
// window's edge, for d, in different windows, as envoyproxy/ratelimit's
// do. A key expires at the end of the window after its own.
//
// # A policy change
//
// A limiter that keeps its name and changes its policy (a deploy raising
// 100/h to 200/h) keeps each key's spent units, as on the other stores:
//
//   - Each policy's keys are apart (see Keys). A key that the new policy's
//     table does not hold starts from its state under the name's former
//     policies, converted by algo.Policy.Convert: the conversion that
//     drains last, of the latest 8 policies. A bucket whose burst alone
//     changes keeps its TAT, a window of the same length its counts, a
//     log its entries, each capped at the new limit; any other change (of
//     algorithm, say) spends under the new policy, at once, the units the
//     old state still counts.
//   - A name's policies are listed in a Redis hash at PREFIX + name +
//     "@policies" (name escaped as in Keys). A table adds its own and
//     reads the others once, at its first call to Redis, within that
//     call's time. A name that is a policy's own string (a limiter's
//     default name) has none.
//   - The script does not decide on a key that Redis does not hold when
//     the name had another policy. The store reads the key under those
//     policies (GET, or HGETALL for a sliding log), converts it at the
//     time the script reported, and calls the script again with the
//     result. The script starts the key from it only if Redis still does
//     not hold the key, and writes it even if the op denies.
//   - So a key is converted once, atomically with its decision, however
//     many processes reach it at once. A key that Redis holds costs no
//     extra command or read; a converted key costs one more script call
//     and a read, once.
//   - On a Cluster the former key is often on another master: the read
//     goes there, and the script never touches it.
//   - During a rolling deploy, processes of the old policy and of the new
//     one each spend on their own policy's keys. A key of the new policy
//     starts once from the old one's state; the units the old processes
//     spend after that are not seen by the new ones, nor the other way
//     round. A key whose new state has drained (and expired) converts
//     again from the old key, if that still counts units.
//   - A key's old state stays until it drains, for processes still on the
//     old policy.
//
// # All or nothing
//
// Store.Apply carries out several operations all or nothing. Keys in one
// hash slot, always on a single Redis, take one script: no other client
// can see a state between them. On a Redis Cluster, put the part of the
// key that should group in braces ("{user:42}:api", "{user:42}:upload")
// so that a user's keys share a slot: Redis hashes only the part in the
// first braces. Keys in several slots take a call per slot, at once (a
// master's calls may share a script call, each still all or nothing);
// when one denies, the units the others admitted are refunded, so the
// batch never admits more than all or nothing allows, but another client
// may see those units spent for the moment between.
//
// # Throughput
//
// Calls that arrive together, from many goroutines, leave together: one
// script call carries up to WithMaxBatch of them (each still decided as if
// alone, in arrival order), and at most WithMaxInFlight script calls wait
// on Redis at once. A lone call goes at once: from its caller's goroutine
// when the client heeds contexts' deadlines (ContextTimeoutEnabled, as
// package storeurl's clients have), else on a sender started for it, so
// that its caller can leave at its deadline (two hand-offs between
// goroutines, which a lone caller feels: give the store such a client for
// the fastest lone calls; docs/benchmarks.md has the figures).
// The store keeps no goroutine of its own: a sender ends once no call
// waits and its last script call is done (answered, or given up by the
// client). It bounds the calls waiting (10,000, then ErrOverloaded). A
// sender that
// has just woken its callers lets them run before it takes the next batch,
// for as long as they keep calling: their next calls then go in that
// batch, not in the one after it. A script call's operations travel packed
// in one string argument, and its reply is one string of doubles: both
// cost Redis and the client less than a value per number. A lone decision
// on a token or leaky bucket or a fixed window, the commonest operation,
// runs in the script on local numbers, without the tables of the general
// path, which costs Redis markedly less time per decision
// (docs/benchmarks.md has the figures).
//
// Store.ApplyEach (through floodgate.AllowEach) carries many
// independent operations, each decided as if alone, in one call of up to
// WithMaxBatch operations (one per hash slot on a Cluster), which goes in
// a script call like any other: a request that checks 100 limits costs
// one round trip. floodgate serve decides an Envoy request's descriptors
// and an HTTP batch in mode "each" so. On a Cluster, each master's share
// of the operations goes with that master's calls (its slots' in one
// script call), the masters at once: a master that is down or stalls fails
// only its own share, within the call's budget, and ApplyEach then
// returns an error wrapping store.ErrPartialFailure, the other
// operations decided (a failsafe.Store in front decides only the failed
// ones by its mode). An Apply is all or nothing: when its keys span
// masters and one fails, it fails whole (see Store.Apply).
//
// # Redis Cluster
//
// On a Redis Cluster, calls are gathered master by master: each master
// has its batches and WithMaxInFlight script calls of its own, so that a
// master that is down or stalls holds up only the calls to its own slots.
// The store is a store.Partitioned whose partitions are the hash slots,
// so that a failsafe.Store in front takes down only the failing master's.
//
// A master's batch goes in one script call, however many hash slots its
// keys span, so random keys batch as on one Redis:
//
//   - The function is flagged allow-cross-slot-keys (Redis 7), which lets
//     it touch keys of any slot of the node it runs on.
//   - It declares one key, which routes the call; Redis still demands
//     that declared keys share a slot, so the others go as arguments.
//   - It reads every key before it writes any. A key that its node does
//     not serve (a slot moved or moving to another master, the layout
//     go-redis holds not yet reloaded) fails the call at its read, with
//     "non local key", before anything changed.
//   - A call that Redis answers with an error changed nothing, so its
//     calls go again, a script call per slot: each op is carried out
//     once, and a slot's failure (a moved slot, a corrupt key) fails only
//     its own slot's calls.
//   - A call that gets no answer (a master down, a timeout) fails its
//     calls, as the script calls per slot to that master would.
//   - A Redis before 7 (the script form), or a master whose function
//     refuses a second slot, gets a script call per slot, in one pipeline.
//
// A call that a master does not answer, or not in time, has go-redis load
// the cluster's layout again at once (one load at a time, 200 ms apart),
// not at its next periodic load (a minute): after a replica has taken
// over a dead master's slots, their calls reach the new master as soon as
// that load is done, within about one caller's deadline or the store's
// timeout.
//
// # Failure
//
// Every call (Table.Decide, Apply, ApplyEach) returns by the store's
// timeout (WithTimeout, default DefaultTimeout) or its context's
// deadline, whichever comes first, whatever the client's options: with
// go-redis's defaults (ContextTimeoutEnabled off, ReadTimeout 3 s) a
// stalled Redis would hold a call for seconds. A call that Redis has not
// answered by then returns an error wrapping ErrUnavailable and
// context.DeadlineExceeded; one whose context is cancelled returns
// context.Canceled. Either way it returns at once, however long Redis
// stalls: if the call was still waiting to go out, nothing was done; if
// its script was on the way, it may still take effect, its results lost.
// The script call goes on in the background, on a sender of the store's
// (at most WithMaxInFlight of them), until the client gives up on it or
// Redis answers; it never touches its caller's ops after the caller has
// returned. A client that heeds contexts (ContextTimeoutEnabled, as
// package storeurl's clients do) gives up at the callers' deadline too; a
// lone caller who sent its own call then waits for that deadline (the
// store's timeout at most), even when its context is cancelled sooner.
// A call that the client fails to send or read (Redis down, a connection
// lost) returns ErrUnavailable with the client's error; one that Redis
// answers with an error returns it, wrapped. To choose
// what a limiter does meanwhile (deny, admit, or decide locally) and to
// recover by itself, wrap the store in a failsafe.Store (package
// failsafe).
//
// # Cached denials
//
// A store made WithDenyCache answers a flood of requests over their
// limit from memory, exactly. Redis stays the one place where units are
// spent.
//
// A denial writes nothing to its key: the script changes a key only when
// it admits, refunds or resets (and deletes a drained one that a peek
// finds). So after Redis denies a decision on a key, the store reads the
// key's state and keeps it. A later decision on that key is decided by
// package algo on that state, at the decision's own time. That gives the
// Decision the script would give, to the nanosecond: remaining units,
// retry and reset waits, window roll-overs and a log's expired entries.
//
//   - When algo denies, that is the answer, without Redis.
//   - When algo would admit (a refill, a new window, a peek), the
//     decision goes to Redis, which alone admits.
//   - Only decisions are answered from the cache: a Table.Decide, an
//     Apply of one OpDecide, and each OpDecide of an ApplyEach on a key
//     that no earlier op of the call sends to Redis.
//   - Every other op goes to Redis and drops its keys' entries, before it
//     goes and once it is done: a process sees its own writes at once.
//   - A sliding log is kept as algo's log of its entries, shared by its
//     readers and written by none. algo writes a log only when it admits,
//     so the cache first peeks; a decision the log would admit goes to
//     Redis.
//   - A policy reload needs nothing: a table of another policy keeps its
//     keys at other Redis keys.
//
// # Fills and invalidations
//
// The fill reads the key (GET, or HGETALL for a sliding log's hash), its
// PTTL and, on Redis's clock, TIME, in one round trip, off the caller's
// path. It reads on the cache's own connection to the server, a RESP3
// connection with CLIENT TRACKING ON OPTIN, and sends CLIENT CACHING YES
// before each read. So Redis tracks only the keys this process read to
// cache them.
//
//   - Redis reports the next write of a tracked key on that connection:
//     an admission, a refund, a reset, by any process; an expiry, an
//     eviction. The store drops the key's entry on receipt.
//   - Redis then forgets the key. It is tracked again only if a later
//     denial fills it again.
//   - A write of a key that no process caches costs Redis nothing more
//     than without the cache, however many processes share it.
//   - FLUSHALL and FLUSHDB (ASYNC too), DEBUG RELOAD and a replica's
//     full resync drop the whole cache.
//   - RESTORE, COPY, RENAME or MOVE onto a cached key drops its entry,
//     as any write does.
//   - SWAPDB, alone, tells tracking nothing. So the connection keeps a
//     marker key of its own, under the prefix, with a 10 s expiry: each
//     PING sets it anew, to a value it never held, and reads the one
//     before. A value not the last one set means the database was
//     swapped: the whole cache drops. A fill reads the marker too, and
//     is dropped if the database was swapped.
//   - A SWAPDB is so seen within a heartbeat (100 ms), or at Store.Sync.
//     On a Cluster there is no SWAPDB, and no marker.
//   - A fill that an invalidation of its key overtakes is dropped, so no
//     state older than the latest invalidation is ever kept.
//
// The invalidation window is the time between another process's write
// and this store dropping the entry: one trip of a push from Redis to
// this process (docs/benchmarks.md, "The Redis deny cache", has the
// figures). A
// decision in it is the one Redis would have made just before the write,
// as if the two had crossed on the wire.
//
// A decision takes no lock: it looks its key up in an index of atomic
// pointers to entries that are never written once published. Fills,
// invalidations and evictions change the index under a mutex.
//
// # Failing safe
//
//   - The cache answers nothing until its connection has turned tracking
//     on and answered a PING.
//   - It sends a PING every 100 ms. It answers only while the last answer
//     came to a PING sent within the last 500 ms: a PING's answer comes
//     after every invalidation of a write Redis made before it.
//   - A connection that breaks, or is silent for a second, drops the
//     whole cache. A new connection starts empty, and tracks only what it
//     reads itself.
//   - A server that refuses to set tracking up (an ACL without CLIENT, a
//     Redis before 6, without RESP3) never has the cache answer.
//     Store.CacheStats reports Live false with the server's error in Err.
//     The connection is tried again after 100 ms, then after waits that
//     double up to 5 s (back to 100 ms once a connection has been live).
//   - A store made WithLogger logs once, at level Warn with the reason,
//     when the cache goes off (a refusal, a connection lost), and once,
//     at level Info, when it is back on.
//   - A key is answered only until Redis may expire it (its PTTL).
//   - Behind a failsafe.Store the cache answers as long as its connection
//     does: a cached denial is Redis's answer, not a fallback.
//
// With Redis's clock (the default) the cache decides at Redis's clock as
// the fill read it (TIME), carried on by this process's monotonic clock.
// That estimate is late by at most the fill's round trip: a decision at
// the edge of a refill may be answered as Redis would have answered it
// that much later. With WithCallerTime both decide at the caller's time,
// and the cache is exact to the nanosecond.
//
// # Memory
//
//   - The cache is bounded in bytes (WithDenyCache). It counts each key
//     at its name's length plus 144 bytes (the entry, its state and its
//     share of the index, measured on the heap).
//   - A sliding log's key counts its log too, once the fill has read it
//     (algo.State.LogSize: 48 bytes and 16 an entry, for a ring of the
//     entries rounded up to a power of two; 176 bytes for a log of 5
//     entries, 2,096 for one of 100).
//   - Past the bound, the cache drops other keys to make room.
//   - A log is read whole, so the cache reads only those whose LIMIT is
//     at most a 32nd of the bound: 1,048,576 for 32 MiB.
//   - Store.CacheStats counts hits, fills, invalidations and flushes
//     (package prommetrics exports them).
//
// # Cached denials on a Cluster
//
//   - Each master has its own tracking connection and heartbeat, started
//     when a key of its slots is first denied (or by Store.Sync).
//   - The fill reads the key on the connection of the master whose slots
//     hold it; a MOVED or ASK reply abandons it.
//   - An entry is answered only while that master's connection is live
//     and go-redis's cluster layout still names it as the master of the
//     key's slot. So a master lost or silent stops answering only its own
//     slots' entries, and a slot that moves (a failover, a resharding) is
//     not answered from the old master's state.
//   - A slot resharded away drops its keys' entries even before go-redis
//     learns of the move: the old master's deletion of each key it
//     migrates is an invalidation. For that, on a Cluster the cache keeps
//     only keys that Redis holds (a cost above the burst on a fresh key
//     is not cached).
//   - The connection of a node that is no longer a master stays until
//     Close.
//
// Redis 6.2 or later is needed (SET PXAT); the tests run on Redis 7, with
// both forms of the code.
package redisstore
