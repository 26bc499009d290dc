// Package prommetrics exports floodgate's metrics to Prometheus: how
// limiters decide, and what their stores hold, for any program that uses
// floodgate as a library. floodgate serve's /metrics is built from it.
//
// A Collector is a prometheus.Collector. Its Observer for a label is a
// floodgate.Observer that counts the decisions of the limiters given it
// (floodgate.WithObserver); AddStore adds a store's counts, read at each
// scrape:
//
//	m := prommetrics.New()
//	api := floodgate.Must(floodgate.NewLimiter(policy, floodgate.WithName("api"), floodgate.WithObserver(m.Observer("api"))))
//	_ = m.AddStore("api", api.Store()) // its own memory store
//	prometheus.MustRegister(m)
//
// # Metrics
//
// By policy, the label given to Collector.Observer:
//
//	floodgate_decisions_total{policy,result}  decisions by result: allowed, denied,
//	                                          dry_run_denied (admitted by dry-run mode), error
//	floodgate_store_errors_total{policy}      errors that were not bad input (a failing store)
//
// A denial over the burst, and a Wait refused (floodgate.ErrWaitTooLong,
// floodgate.ErrQueueFull), are denied; a negative cost, a time out of
// range and a key the store refuses are errors but not store errors. In
// floodgate.AllowAll every limiter counts the request's outcome.
//
// By store, the name given to AddStore; a memstore.Store's:
//
//	floodgate_memory_keys{store}             keys held
//	floodgate_memory_bytes{store}            bytes held, as the bound counts them
//	floodgate_memory_max_bytes{store}        the bound (memstore.MaxBytes)
//	floodgate_memory_drained_total{store}    keys dropped because their state drained
//	floodgate_memory_evictions_total{store}  keys evicted to stay within the bounds
//
// a failsafe.Store's (its failsafe.Stats):
//
//	floodgate_store_down{store}                 1 while the store it wraps is down, else 0
//	floodgate_store_failures_total{store}       calls to that store that failed
//	floodgate_store_fallbacks_total{store,mode} calls decided by the failure mode
//	floodgate_store_trips_total{store}          times it went down
//	floodgate_store_recoveries_total{store}     times it came back
//
// a redisstore.Store's or filestore.Store's deny cache (WithDenyCache;
// its CacheStats, a store.CacheStats), alone or behind a failsafe.Store:
//
//	floodgate_deny_cache_hits_total{store}           decisions answered without Redis or a transaction
//	floodgate_deny_cache_fills_total{store}          keys' states read after a denial
//	floodgate_deny_cache_invalidations_total{store}  keys dropped because someone wrote them
//	floodgate_deny_cache_flushes_total{store}        drops of every key (connection lost, FLUSHALL; another process's commit to the file)
//	floodgate_deny_cache_evictions_total{store}      keys dropped to stay within the bound
//	floodgate_deny_cache_entries{store}              keys held
//	floodgate_deny_cache_bytes{store}                bytes held, as the bound counts them
//	floodgate_deny_cache_live{store}                 1 while the cache may answer, else 0
//
// A failsafe store failing locally keeps its memory store apart: add it
// too, under another name (floodgate serve calls them main and fallback).
//
// By front-end, the name given to AddFrontEnd: an httplimit.Middleware's or
// grpclimit.Interceptor's Stats, converted to FrontEndStats:
//
//	floodgate_frontend_requests_total{frontend,outcome}  requests not simply admitted: denied,
//	                                                      dry_run_denied, key_error, error,
//	                                                      served_on_error, abandoned
//
// # Cost
//
// A limiter without an Observer pays one comparison per decision. An
// Observer adds an interface call, a random stripe and an atomic add:
// admissions and denials are counted in 32 stripes, each on its own cache
// line, so that goroutines on many cores seldom contend; a scrape sums
// them. docs/benchmarks.md has the figures.
//
// # OpenTelemetry
//
// The metrics reach OpenTelemetry through its bridge from Prometheus
// (go.opentelemetry.io/contrib/bridges/prometheus), which reads a
// prometheus.Gatherer at each collection, without a second mechanism:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(m)
//	reader := metric.NewPeriodicReader(exporter, metric.WithProducer(otelprom.NewMetricProducer(otelprom.WithGatherer(reg))))
//	provider := metric.NewMeterProvider(metric.WithReader(reader))
//
// where metric is go.opentelemetry.io/otel/sdk/metric and otelprom the
// bridge (these lines were checked with v1.47.0 and v0.72.0); the
// counters become OpenTelemetry sums, the gauges gauges. floodgate itself
// does not depend on OpenTelemetry.
package prommetrics
