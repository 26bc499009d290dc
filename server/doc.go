// Package server is floodgate's rate-limit service, the engine of
// `floodgate serve`: rate limits for programs in any language and for
// proxies, decided on one store (a store.Store: this process's memory, a
// file, Redis or a Redis Cluster) by every algorithm of the core.
//
// # The model
//
// The service serves named policies from its configuration (Config), such
// as "login: sliding-log 5/1m"; a caller asks about a key (a user, an
// address) under a policy, by name or inline as policy text, at a cost,
// and gets a decision: allowed or not, the units remaining, the wait
// before a retry would pass (retry_after) and the time until the key is
// back to its initial state (reset_after), in seconds. A batch of checks
// is decided all or nothing (floodgate.AllowAll: a refusal spends nothing
// anywhere, and says which check refused) or each alone. A cost of 0 is a
// peek. A check alone may give a max_wait: it then takes a place in the
// key's queue instead of a refusal (floodgate.Limiter.Schedule), and the
// answer's delay says how long the caller is to wait before acting; the
// service answers at once and holds nothing open, and limits.max_wait
// bounds every queue. Each key's state is kept per policy name: a name
// given another policy keeps its keys' spent units (algo.Policy.Convert)
// on every store: memory, file and Redis.
//
// A denial is an answer, 200 with "allowed": false; errors are for broken
// requests (400, naming the problem), missing or wrong tokens (401) and a
// failing store (503 with Retry-After, by the failure mode configured: by
// default fail-closed, which denies).
//
// # The parts
//
// Server is the HTTP side: the JSON API (Handler), the operations
// endpoints (OpsHandler: Prometheus metrics, health, readiness, pprof),
// bearer-token authentication and configurations replaced while serving
// (SetConfig). Run wires everything as the serve command runs it: the
// store by URL, wrapped in a failsafe.Store unless it is the
// memory store; Envoy's rate-limit service (package envoyrls) over gRPC and
// at POST /json, with envoyproxy/ratelimit's health checks (gRPC health
// for "ratelimit", GET /healthcheck), which tell what /readyz tells;
// TLS on both APIs; reloads when a configuration file
// changes or on a signal, where an invalid configuration is logged and the
// previous one kept; the memory store's snapshot, restored at start,
// written every interval and at shutdown, so that a restart loses nothing;
// and the graceful shutdown, which lets requests under way finish.
//
// Package client is the Go client of the JSON API.
//
// # Concurrency
//
// A Server is safe for concurrent use. Each request is decided wholly under
// the configuration it started with.
package server
