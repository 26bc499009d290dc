package prommetrics

import (
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	decisionsDesc = prometheus.NewDesc("floodgate_decisions_total",
		"Decisions of limiters by policy (the label their Observer was given) and result: allowed, denied, dry_run_denied (admitted in dry-run mode) or error.", []string{"policy", "result"}, nil)
	storeErrorsDesc = prometheus.NewDesc("floodgate_store_errors_total",
		"Decisions that failed because the store did (not for bad input), by policy.", []string{"policy"}, nil)

	memKeysDesc = prometheus.NewDesc("floodgate_memory_keys",
		"Keys held by a memory store (store: its name; serve's are main and fallback), drained ones not yet dropped included.", []string{"store"}, nil)
	memDrainedDesc = prometheus.NewDesc("floodgate_memory_drained_total",
		"Keys a memory store dropped because their state had drained (which changes no decision).", []string{"store"}, nil)
	memEvictionsDesc = prometheus.NewDesc("floodgate_memory_evictions_total",
		"Keys a memory store evicted to stay within its maximum of keys or bytes (a returning key starts no better off).", []string{"store"}, nil)
	memBytesDesc = prometheus.NewDesc("floodgate_memory_bytes",
		"Bytes a memory store holds (keys, states, logs, tables), as its bound counts them.", []string{"store"}, nil)
	memMaxBytesDesc = prometheus.NewDesc("floodgate_memory_max_bytes",
		"The bound on a memory store's bytes (memstore.MaxBytes; serve: store.max_bytes, --max-memory).", []string{"store"}, nil)

	storeDownDesc = prometheus.NewDesc("floodgate_store_down",
		"Whether the store a failsafe store wraps (one of a Redis Cluster's hash slots, at least) is taken to be down now (1) or not (0).", []string{"store"}, nil)
	storeFailuresDesc = prometheus.NewDesc("floodgate_store_failures_total",
		"Calls to the store a failsafe store wraps that failed.", []string{"store"}, nil)
	storeFallbacksDesc = prometheus.NewDesc("floodgate_store_fallbacks_total",
		"Calls a failsafe store decided by its failure mode (open, closed, local) because the store it wraps was failing.", []string{"store", "mode"}, nil)
	storeTripsDesc = prometheus.NewDesc("floodgate_store_trips_total",
		"Times the store a failsafe store wraps (or one of a Redis Cluster's hash slots) was taken down after failing calls met the threshold.", []string{"store"}, nil)
	storeRecoveriesDesc = prometheus.NewDesc("floodgate_store_recoveries_total",
		"Times the store a failsafe store wraps (or one of a Redis Cluster's hash slots) came back after being down.", []string{"store"}, nil)
)

var (
	cacheHitsDesc = prometheus.NewDesc("floodgate_deny_cache_hits_total",
		"Decisions a Redis store's deny cache answered without Redis (denials, exact).", []string{"store"}, nil)
	cacheFillsDesc = prometheus.NewDesc("floodgate_deny_cache_fills_total",
		"Keys' states a deny cache read from Redis after a denial.", []string{"store"}, nil)
	cacheInvalidationsDesc = prometheus.NewDesc("floodgate_deny_cache_invalidations_total",
		"Keys a deny cache dropped because Redis reported a write to them.", []string{"store"}, nil)
	cacheFlushesDesc = prometheus.NewDesc("floodgate_deny_cache_flushes_total",
		"Times a deny cache dropped every key: its tracking connection lost or silent, a FLUSHALL.", []string{"store"}, nil)
	cacheEvictionsDesc = prometheus.NewDesc("floodgate_deny_cache_evictions_total",
		"Keys a deny cache dropped to stay within its bound in bytes.", []string{"store"}, nil)
	cacheEntriesDesc = prometheus.NewDesc("floodgate_deny_cache_entries",
		"Keys a deny cache holds.", []string{"store"}, nil)
	cacheBytesDesc = prometheus.NewDesc("floodgate_deny_cache_bytes",
		"Bytes a deny cache holds, as its bound counts them.", []string{"store"}, nil)
	cacheLiveDesc = prometheus.NewDesc("floodgate_deny_cache_live",
		"Whether a deny cache may answer now (1): its tracking connection is up and answering.", []string{"store"}, nil)
)

// allDescs are the descriptions of every metric a Collector may collect.
var allDescs = []*prometheus.Desc{decisionsDesc, storeErrorsDesc,
	memKeysDesc, memDrainedDesc, memEvictionsDesc, memBytesDesc, memMaxBytesDesc,
	storeDownDesc, storeFailuresDesc, storeFallbacksDesc, storeTripsDesc, storeRecoveriesDesc,
	cacheHitsDesc, cacheFillsDesc, cacheInvalidationsDesc, cacheFlushesDesc, cacheEvictionsDesc,
	cacheEntriesDesc, cacheBytesDesc, cacheLiveDesc, frontEndDesc}

func collectDecisions(ch chan<- prometheus.Metric, policy string, o *Counts) {
	allowed, denied := o.load()
	ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.CounterValue, float64(allowed), policy, "allowed")
	ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.CounterValue, float64(denied), policy, "denied")
	ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.CounterValue, float64(o.dryRun.Load()), policy, "dry_run_denied")
	ch <- prometheus.MustNewConstMetric(decisionsDesc, prometheus.CounterValue, float64(o.errs.Load()), policy, "error")
	ch <- prometheus.MustNewConstMetric(storeErrorsDesc, prometheus.CounterValue, float64(o.storeErrs.Load()), policy)
}

func collectMemory(ch chan<- prometheus.Metric, name string, st memstore.Stats) {
	ch <- prometheus.MustNewConstMetric(memKeysDesc, prometheus.GaugeValue, float64(st.Keys), name)
	ch <- prometheus.MustNewConstMetric(memDrainedDesc, prometheus.CounterValue, float64(st.Drained), name)
	ch <- prometheus.MustNewConstMetric(memEvictionsDesc, prometheus.CounterValue, float64(st.Evictions), name)
	ch <- prometheus.MustNewConstMetric(memBytesDesc, prometheus.GaugeValue, float64(st.Bytes), name)
	ch <- prometheus.MustNewConstMetric(memMaxBytesDesc, prometheus.GaugeValue, float64(st.MaxBytes), name)
}

func collectFailsafe(ch chan<- prometheus.Metric, name string, st failsafe.Stats) {
	down := 0.0
	if st.Down {
		down = 1
	}
	ch <- prometheus.MustNewConstMetric(storeDownDesc, prometheus.GaugeValue, down, name)
	ch <- prometheus.MustNewConstMetric(storeFailuresDesc, prometheus.CounterValue, float64(st.Failures), name)
	ch <- prometheus.MustNewConstMetric(storeFallbacksDesc, prometheus.CounterValue, float64(st.Open), name, "open")
	ch <- prometheus.MustNewConstMetric(storeFallbacksDesc, prometheus.CounterValue, float64(st.Closed), name, "closed")
	ch <- prometheus.MustNewConstMetric(storeFallbacksDesc, prometheus.CounterValue, float64(st.Local), name, "local")
	ch <- prometheus.MustNewConstMetric(storeTripsDesc, prometheus.CounterValue, float64(st.Trips), name)
	ch <- prometheus.MustNewConstMetric(storeRecoveriesDesc, prometheus.CounterValue, float64(st.Recoveries), name)
}

func collectDenyCache(ch chan<- prometheus.Metric, name string, st store.CacheStats) {
	live := 0.0
	if st.Live {
		live = 1
	}
	ch <- prometheus.MustNewConstMetric(cacheHitsDesc, prometheus.CounterValue, float64(st.Hits), name)
	ch <- prometheus.MustNewConstMetric(cacheFillsDesc, prometheus.CounterValue, float64(st.Fills), name)
	ch <- prometheus.MustNewConstMetric(cacheInvalidationsDesc, prometheus.CounterValue, float64(st.Invalidations), name)
	ch <- prometheus.MustNewConstMetric(cacheFlushesDesc, prometheus.CounterValue, float64(st.Flushes), name)
	ch <- prometheus.MustNewConstMetric(cacheEvictionsDesc, prometheus.CounterValue, float64(st.Evictions), name)
	ch <- prometheus.MustNewConstMetric(cacheEntriesDesc, prometheus.GaugeValue, float64(st.Entries), name)
	ch <- prometheus.MustNewConstMetric(cacheBytesDesc, prometheus.GaugeValue, float64(st.Bytes), name)
	ch <- prometheus.MustNewConstMetric(cacheLiveDesc, prometheus.GaugeValue, live, name)
}
