// Package envoyrls is Envoy's global rate limit service over floodgate:
// the gRPC protocol envoy.service.ratelimit.v3 (ShouldRateLimit), which
// Envoy, Istio and the other Envoy-based gateways speak, and its HTTP form
// POST /json, configured by envoyproxy/ratelimit's own YAML files and
// answering as envoyproxy/ratelimit does, with floodgate's algorithms and
// stores underneath.
//
// # The model
//
// Envoy asks, for each request it proxies, about a domain and a list of
// descriptors; each descriptor is a list of entries, key/value pairs that
// Envoy's rate limit actions built from the request:
//
//	domain: edge
//	descriptor 1: (remote_address, 10.0.0.1)
//	descriptor 2: (tenant, acme), (path, /api)
//
// The configuration has one file per domain, each a tree of descriptors:
//
//	domain: edge
//	descriptors:
//	  - key: remote_address             # any value: a limit per address
//	    rate_limit: {unit: second, requests_per_unit: 10}
//	  - key: remote_address
//	    value: 192.0.2.66               # this value: a limit of its own
//	    rate_limit: {unit: second, requests_per_unit: 0}
//	  - key: tenant
//	    value: acme
//	    descriptors:                    # nested: (tenant, acme), (path, ...)
//	      - key: path
//	        value: /api/*               # wildcard: '*' stands for any text
//	        rate_limit: {unit: minute, requests_per_unit: 600}
//
// Each descriptor of a request is matched against its domain's tree, entry
// by entry, one level per entry: an entry matches the descriptor with its
// key and value, else the first wildcard (in file order) that matches it,
// else the descriptor with its key and no value. A wildcard is a
// descriptor with a '*' in its value: each '*' stands for any run of
// characters, the empty one too, anywhere and as often as needed
// (/api/*/action matches /api/42/action and /api//action, *.png any
// value ending in .png); a '*' in a key makes the key and value joined
// by '_' (the key alone when there is no value) a pattern for the
// entry's key and value so joined, as upstream. Only that one descriptor
// matches, even when it has no rate_limit: (tenant, acme) never falls
// back to the descriptor for every tenant. The request descriptor's rule
// is the rate_limit of the descriptor its last entry matches, so that a
// request descriptor of two entries can only match a rule at depth two,
// and one that runs past the tree's leaves matches nothing. Each distinct
// list of entries (domain, keys and values) gets its own counter
// under the rule: (remote_address, 10.0.0.1) and (remote_address,
// 10.0.0.2) are limited separately.
//
// A rule is a fixed window: at most requests_per_unit hits in each
// second, minute, hour, day, week (7 days), month (30 days) or year (365
// days), windows aligned to the Unix epoch, counted exactly as upstream
// counts them (see below). The answer has one status per descriptor, in
// the request's order, and an overall code, OVER_LIMIT when any status is:
//
//	code                  OK or OVER_LIMIT
//	current_limit         the rule: requests_per_unit, unit, name
//	limit_remaining       hits left in the window (0 when over)
//	duration_until_reset  until the window ends, in whole seconds
//
// A descriptor that matches no rule gets OK and nothing else. Each
// descriptor costs hits_addend hits: its own hits_addend when set (0
// checks without counting), else the request's, where 0 means 1.
//
// # Semantics, as envoyproxy/ratelimit's
//
//   - Descriptors are decided independently: every matched descriptor
//     is counted, even when another of the same request is over its limit
//     (upstream increments all its counters at once), so a request that is
//     refused still spends from its other descriptors' quotas.
//   - A hit over the limit counts too: once a request has gone over a
//     window's limit, every later request in that window is over it, even
//     one costing less than what was left (upstream's counter has gone
//     past the limit), and a check of 0 hits on it is over too.
//   - requests_per_unit: 0 blocks: every request that counts a hit is
//     OVER_LIMIT (a check of 0 hits is OK until one was counted).
//   - unlimited: true answers OK, with limit_remaining 4294967295 and no
//     current_limit, and counts nothing.
//   - shadow_mode: true on a descriptor counts as usual and reports the
//     truth in limit_remaining, but its status is OK: the rule never
//     denies. WithShadowMode does the same for the whole service, except
//     that the statuses stay OVER_LIMIT and only the overall code is OK.
//   - quota_mode: true on a descriptor (WithQuotaMode: on every one, as
//     upstream's QUOTA_MODE) counts and answers its status as usual, but
//     the overall code is OVER_LIMIT only when every descriptor in quota
//     mode is over (or another descriptor is): a caller asking about
//     several quotas learns which have some left.
//   - metadata on a descriptor (any mapping) comes back, with
//     WithDynamicMetadata (upstream's RESPONSE_DYNAMIC_METADATA), in the
//     answer's dynamic_metadata under "metadata", merged from the rules
//     of the descriptors not over their limit, next to the request's
//     domain, descriptors and hits_addend.
//   - name and replaces: when a request has a descriptor whose rule
//     replaces the name of another descriptor's rule, that other
//     descriptor is not decided at all (status OK, nothing counted).
//   - share_threshold: true on a wildcard makes all the values it matches
//     share one counter instead of one each; it is an error on a
//     descriptor without '*'.
//   - A descriptor's limit (Envoy's limit override) replaces the
//     configuration's rule for it, in a known domain: a fixed window of
//     the given requests_per_unit and unit (times unit_multiplier),
//     counted on the descriptor's counter for that window, which the
//     configured rule shares: 5/hour, two hits, then an override of
//     10/hour leaves 7.
//   - A domain the configuration does not have is answered OK, every
//     status OK with no limit.
//   - An empty domain or no descriptor is an error, with upstream's
//     message; see Service.ShouldRateLimit for the others.
//
// The differences, all at the edges:
//
//   - Errors have gRPC codes: an empty domain or no descriptor is
//     codes.InvalidArgument, where upstream answers codes.Unknown (its
//     errors have no code, and gRPC gives those Unknown). Envoy treats
//     every error alike (its failure_mode_deny decides), and POST /json
//     answers both with 400, as upstream's does. A limit override whose
//     unit is not one (UNKNOWN; Envoy's has no week) is InvalidArgument
//     too, where upstream's service panics and its process ends.
//   - quota_mode answers as upstream's main branch does; the version the
//     Go module proxy serves (module bench's EnvoyRateLimitVersion)
//     answers a quota over its limit with status OK and no reset, and
//     never with an overall OVER_LIMIT.
//   - A limit override of another unit than its descriptor's rule has a
//     counter of its own; upstream's is the rule's whenever both windows
//     begin at the same second (its counter's key names a window's
//     start, not its length: at midnight every window begins).
//   - Matching compares keys and values, where upstream compares them
//     joined by '_', so upstream's accidental matches across that
//     separator (key a_b value c taken for key a value b_c, or the
//     wildcard value * of key k for key k_x) do not happen. A '*' in a
//     key is matched as upstream matches it, across the separator.
//   - is_negative_hits is refused; a limit override's unit_multiplier is
//     honoured (upstream counts it in a window of one unit).
//   - LoadConfig reads the *.yaml and *.yml files of the directory tree,
//     never a dot file; upstream reads every file, dot files too by
//     default. Each file it skips that upstream would read is a warning
//     (Config.Warnings), which the Service logs.
//   - Configuration files are checked more strictly (see below); two
//     files with one domain are an error, as by default upstream (its
//     MERGE_DOMAIN_CONFIG setting has no equivalent); a month is always
//     30 days (upstream's default; it has a setting for calendar months).
//   - Upstream's statistics are not here: the serving process adds what
//     it needs, with Stats and WithObserver. Upstream's local cache
//     answers an over-limit key from memory until its window ends and
//     never counts those hits; floodgate answers them from memory too,
//     and counts them (see "Hits over the limit"). Upstream
//     leaves a rule's metadata out of the answer when detailed_metric or
//     value_to_metric renames its statistics; floodgate always sends it.
//   - Response headers (WithResponseHeaders) describe the descriptor
//     upstream's describe, with the values of its status, so that they
//     differ from upstream's only where the status does (a
//     unit_multiplier's window, floodgate's algorithms).
//
// # Configuration files
//
// ParseConfig and LoadConfig read envoyproxy/ratelimit's format as it is:
//
//	domain: <name>                     # required, unique among the files
//	descriptors:
//	  - key: <key>                     # required
//	    value: <value>                 # optional; each '*' is a wildcard
//	    rate_limit:                    # optional
//	      unit: <second|minute|hour|day|week|month|year>
//	      requests_per_unit: <0 .. 2^32-1>
//	      unlimited: <bool>            # instead of unit and requests_per_unit
//	      name: <name>                 # for replaces
//	      replaces: [{name: <name>}, ...]
//	    shadow_mode: <bool>
//	    quota_mode: <bool>
//	    metadata: <mapping>            # sent back with WithDynamicMetadata
//	    share_threshold: <bool>        # on a wildcard ('*') only
//	    detailed_metric: <bool>        # accepted, ignored: statistics only
//	    value_to_metric: <bool>        # accepted, ignored: statistics only
//	    descriptors: [...]             # nested descriptors
//
// A key that is not in this list where it stands is an error naming it
// (metadata holds any keys), so that a typo (shadowmode) is caught
// instead of silently ignored (upstream checks every key against one
// list of all the keys, so it accepts a key in the wrong place, and
// ignores it). A file of more than
// one YAML document is an error too (upstream reads the first). YAML is
// otherwise read as upstream's library reads it: a number or a boolean
// where a string is expected is its text (value: 80), yes/no and on/off
// are booleans, and anchors, aliases and merge keys work.
//
// floodgate adds, in a rate_limit, any of its algorithms in place of the
// fixed window:
//
//	rate_limit: {unit: minute, requests_per_unit: 100, algorithm: token-bucket, burst: 20}
//
// algorithm is token-bucket, leaky-bucket, sliding-log, sliding-window or
// fixed-window (the default); burst (or capacity, the same setting) is a
// token-bucket's burst or a leaky-bucket's capacity. Such a rule admits
// and refuses by floodgate's semantics (package algo): a refused request
// spends nothing, limit_remaining is what the algorithm has left, and
// duration_until_reset is, rounded up to whole seconds, the time until a
// refused request would be admitted, or for an admitted one until the
// limit is back to its initial state (a full bucket, an empty log).
//
// # State and stores
//
// The counters live in a store.Store: the memory store by default,
// or a file or Redis store shared by several processes, which then decide
// together. Each rule of floodgate's algorithms is a limiter named
// "envoyrls/", its domain ('%' and '/' escaped as in URLs), "/" and its
// descriptors as its statistics name them (api.tenant_acme is
// "envoyrls/api/tenant_acme"). A domain's fixed windows' counters are
// named "envoyrls/" followed by the domain: on Redis counters of its own
// (Redis keys of integers; off with redisstore.WithCounters(false)),
// elsewhere a table per window length (store.TableCounters); each keyed by the
// descriptor's entries written as key=value pairs joined by '&' (escaped
// as in a URL query), or by their
// SHA-256 when that is longer than 512 bytes, so that a request with
// huge values cannot make the store hold huge keys. The other
// algorithms' rules are counted under their own policy. SetConfig swaps
// configurations atomically, and rules that did not change keep their
// state. A rule whose descriptors stay and whose policy changes keeps its
// keys' spent units on every store, converted as algo.Policy.Convert
// says (see store's package doc): a fixed window keeps its count, a
// raise gives the new headroom at once, a cut takes effect at once, a
// change of algorithm spends the units the old state still counts.
//
// # Fixed windows
//
// A fixed window is counted as upstream counts it:
//   - One counter per descriptor and window length, whatever the limit
//     (store.Counters, from store.CountersOf). A limit override shares the
//     configured rule's count; a rule whose requests_per_unit changed
//     keeps it.
//   - Every hit counts; the rule's requests_per_unit decides on the count.
//   - The window is the one holding the service's clock, on every store
//     (but see Redis's tables below). Answers from memory (below) use
//     the same clock, so both agree on the window's edges.
//   - On Redis a counter is an integer key of the window: an addition is
//     an INCRBY, and the key's expiry when it made the key, in one call
//     of the store's counters' function, which carries the additions of
//     the requests that reach the store together. No clock but the
//     service's places a window, so answers from the store and from
//     memory agree on its edges, whatever Redis's clock says.
//   - Elsewhere, and on Redis made redisstore.WithCounters(false), a
//     counter is a table of a fixed window admitting 2^32-1 hits
//     (store.TableCounters): a hit that would take it past that is over,
//     and fills it. On Redis the table's window is then placed by
//     Redis's clock (unless redisstore.WithCallerTime): a service whose
//     clock is off Redis's by more than a round trip answers from memory
//     as over the limit hits that Redis would count in a new window, up
//     to a whole window of them (TestSkewedClockOnRedis).
//   - A request's fixed windows of one length go in one call of the
//     counters, in the request's order.
//
// # Mixed fleets
//
// A fleet sharing one Redis counts a fixed window in one place only when
// every instance counts in the same kind of counter. Instances of a
// version that counted on tables (before Redis counters of their own were
// the default) and instances of this one count a descriptor's hits under
// two keys: during a rolling upgrade, each kind admits up to the limit,
// so a window may admit up to twice its limit, in each window in which
// both kinds serve (one or two windows for a rollout shorter than a
// window). To avoid it, start the new instances with tables (floodgate serve
// --envoy-table-counters, server.Options.EnvoyTableCounters), and turn
// them off in a second rollout, which splits at most one window again.
//
// # Requests
//
// The service reads its clock once per request. The fixed windows go to
// their counters, and the rules of floodgate's algorithms, at the same
// time, through floodgate.Limiters: floodgate.AllowEachAt decides them at
// that instant, each as if alone, in one call of the store's ApplyEach (on
// Redis, one script call). A rule in shadow mode, or a service in shadow
// mode, has its limiter in dry-run mode (floodgate.WithDryRun). A request
// of one such descriptor is its limiter's AllowAt, which on Redis joins
// the calls of concurrent requests.
//
// While a store behind a failsafe.Store is down, its mode decides every
// rule alike:
//   - FailOpen answers OK (nothing remaining known), a fixed window too;
//   - FailClosed fails the request with Unavailable;
//   - FailLocal counts on this process's memory store.
//
// Stats counts a request as shadowed when a descriptor was over its limit
// in shadow mode.
//
// # Hits over the limit
//
// A fixed window counts every hit, so that without more each hit is a
// store call, a write, even one over the limit: a flood of requests on a
// descriptor over its limit would be a flood of the store. But within a
// window a counter only grows, so once the store has answered that a
// counter holds C hits, every later hit on it in that window is over
// every limit below C, whatever other processes do. The service keeps,
// for each counter that the store found over a rule's limit in the
// current window, a lower bound of its count (the store's last answer,
// plus the hits counted since), and answers those hits from memory: the
// status the store's answer would give (OVER_LIMIT, or OK in a rule's
// shadow_mode; the rule's current_limit; duration_until_reset until the
// window ends), the same statuses, every field, as when every hit goes to
// the store. It owes the store those hits, and writes them, one
// operation per counter and ApplyEach calls of up to 512 counters, every
// flush interval (WithFlushInterval, DefaultFlushInterval by default),
// at Close, and with the next hit on the counter that goes to the store.
// It answers from memory only while more than a flush interval is left
// of the window, so that the flusher writes the hits before the window
// ends. A limit at or above the known count (a limit override, a rule
// whose limit a reload raised) goes to the store, with the owed hits,
// and so decides on the exact count.
//
// The cost is a window in which the others read less than the truth:
// another process sharing the store (or this one, through a limit that
// goes to the store) reads a count lower than the truth by at most the
// hits answered from memory and not yet written, for at most a flush
// interval (TestLocalAnswersStaleRead measures it: 50 hits unseen for a
// flush interval, then all of them). So a process may admit, in that
// interval, hits that another's unwritten hits would have refused; with
// one process, or with every hit to one process, there is no such
// window. Hits owed to a window that has ended are dropped, since no
// decision reads a window's count after it (a store inspected by other
// means shows them missing). The store calls of this process's requests
// wait for the batch of a flush under way (512 counters, one store
// call), so that its hits land in their window; a flush stops at its
// first batch that fails, the others keeping their hits. But
// a flush that reaches the store after another process has decided the
// next window there (the flusher a flush interval late) counts its hits
// in that next window. A store that fails a flush keeps its documented behaviour for
// the counter's next hits, which go to the store again (and fail, or are
// decided by failsafe's mode), with the hits the flush could not write. A
// store emptied during a window (FLUSHALL, a restart without
// persistence) is noticed at the next flush of a counter's hits, whose
// answer replaces the known count; until then, for at most a flush
// interval, the counter is still answered as over. Shadow mode is
// unchanged: a counter is never in dry-run mode, and shadow mode acts on
// the answer. WithFlushInterval(-1) sends every hit to the store.
// Stats.FromMemory counts the descriptors answered from memory
// (floodgate serve: floodgate_envoy_from_memory_total in /metrics).
//
// # Serving
//
// A Service is the gRPC service (rlsv3.RegisterRateLimitServiceServer)
// and, with JSONHandler, the HTTP one; its methods are safe for
// concurrent use. Stats counts its answers, WithObserver reports each
// descriptor's, and WithLogger logs store failures, configuration
// changes and the configuration's warnings. WithResponseHeaders asks
// Envoy to add rate-limit header fields to the client's response
// (response_headers_to_add), as upstream's LIMIT_RESPONSE_HEADERS_ENABLED
// does: upstream's RateLimit-Limit, RateLimit-Remaining and
// RateLimit-Reset, the same as X-RateLimit-*, or the IETF draft's
// RateLimit-Policy and RateLimit (see Headers).
//
// # Held to upstream
//
// make test holds this package to envoyproxy/ratelimit itself, at the
// version the Go module proxy serves (EnvoyRateLimitVersion in module
// bench, whose TestUpstream tests read upstream's files from the module
// cache and run upstream's loader, and its service on a real
// redis-server, in process, on the same fake clock as floodgate): every
// YAML file of upstream's module and YAML block of its README, alone, by
// directory and in the pairs upstream's tests load, is loaded or refused
// as upstream's loader does (68 sets: 29 loaded, 39 refused), and its
// configuration directories as its runner's file provider loads them;
// the requests of upstream's integration test, over gRPC and POST /json,
// and about 2,600 requests derived from upstream's files and the tests'
// own (in global shadow mode and with response headers too) get
// upstream's answers, on the memory store and on Redis; and each
// difference listed above is asserted to be one, upstream's side run too.
package envoyrls
