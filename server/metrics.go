package server

import (
	"github.com/floodgate/floodgate/envoyrls"
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the Server's Prometheus metrics (see the serve command's
// usage for the list).
type metrics struct {
	reg         *prometheus.Registry
	decisions   *prometheus.CounterVec   // policy, result
	requests    *prometheus.CounterVec   // api, endpoint, code
	latency     *prometheus.HistogramVec // api, endpoint
	inFlight    *prometheus.GaugeVec     // api
	storeErrors *prometheus.CounterVec   // policy
	reloads     *prometheus.CounterVec   // config, result
	reloadOK    *prometheus.GaugeVec     // config
	snapshots   *prometheus.CounterVec   // result
	snapshotAge prometheus.Gauge
}

// latencyBuckets go from 25µs to about 0.8s, doubling.
var latencyBuckets = prometheus.ExponentialBuckets(25e-6, 2, 16)

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		reg: reg,
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_decisions_total",
			Help: "Decisions of the HTTP API by policy (\"inline\" for policy_text) and result: allowed, denied or error.",
		}, []string{"policy", "result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_requests_total",
			Help: "Requests by API (http, grpc), endpoint and status code.",
		}, []string{"api", "endpoint", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "floodgate_request_duration_seconds",
			Help:    "Time to answer a request, by API (http, grpc) and endpoint.",
			Buckets: latencyBuckets,
		}, []string{"api", "endpoint"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "floodgate_requests_in_flight",
			Help: "Requests being answered now, by API (http, grpc).",
		}, []string{"api"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_store_errors_total",
			Help: "Decisions of the HTTP API that failed because the store did, by policy.",
		}, []string{"policy"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_config_reloads_total",
			Help: "Configuration reloads by configuration (floodgate, envoy) and result (success, failure).",
		}, []string{"config", "result"}),
		reloadOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "floodgate_config_last_reload_successful",
			Help: "Whether the last reload of the configuration (floodgate, envoy) succeeded.",
		}, []string{"config"}),
		snapshots: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_snapshot_writes_total",
			Help: "Snapshots of the memory store written, by result (success, failure).",
		}, []string{"result"}),
		snapshotAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "floodgate_snapshot_last_success_timestamp_seconds",
			Help: "When the last snapshot of the memory store was written, in Unix seconds.",
		}),
	}
	reg.MustRegister(m.decisions, m.requests, m.latency, m.inFlight, m.storeErrors, m.reloads, m.reloadOK, m.snapshots, m.snapshotAge,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// registerStore adds the counts of the store: a memory store's keys and
// evictions, a failsafe store's failures and fallbacks (and its local
// memory store's keys).
func (m *metrics) registerStore(s store.Store, local *memstore.Store) {
	m.reg.MustRegister(&storeCollector{store: s, local: local})
}

var (
	memKeysDesc = prometheus.NewDesc("floodgate_memory_keys",
		"Keys held by a memory store (store: main, or fallback for the failsafe's local store), drained ones not yet dropped included.", []string{"store"}, nil)
	memDrainedDesc = prometheus.NewDesc("floodgate_memory_drained_total",
		"Keys a memory store dropped because their state had drained (which changes no decision).", []string{"store"}, nil)
	memEvictionsDesc = prometheus.NewDesc("floodgate_memory_evictions_total",
		"Keys a memory store evicted to stay within its maximum of keys or bytes (a returning key starts no better off).", []string{"store"}, nil)
	memBytesDesc = prometheus.NewDesc("floodgate_memory_bytes",
		"Bytes a memory store holds (keys, states, logs, tables), as its bound counts them.", []string{"store"}, nil)
	memMaxBytesDesc = prometheus.NewDesc("floodgate_memory_max_bytes",
		"The bound on a memory store's bytes (store.max_bytes, --max-memory).", []string{"store"}, nil)
	storeDownDesc = prometheus.NewDesc("floodgate_store_down",
		"Whether the shared store (one of a Redis Cluster's hash slots, at least) is taken to be down now (1) or not (0).", nil, nil)
	storeFailuresDesc = prometheus.NewDesc("floodgate_store_failures_total",
		"Calls to the shared store that failed.", nil, nil)
	storeFallbacksDesc = prometheus.NewDesc("floodgate_store_fallbacks_total",
		"Calls decided by the failure mode (open, closed, local) because the shared store was failing.", []string{"mode"}, nil)
	storeTripsDesc = prometheus.NewDesc("floodgate_store_trips_total",
		"Times the shared store (or one of a Redis Cluster's hash slots) was taken down after failing calls met the threshold.", nil, nil)
	storeRecoveriesDesc = prometheus.NewDesc("floodgate_store_recoveries_total",
		"Times the shared store (or one of a Redis Cluster's hash slots) came back after being down.", nil, nil)
)

// storeCollector reads a store's counts at each scrape.
type storeCollector struct {
	store store.Store
	local *memstore.Store // the failsafe store's, or nil
}

func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	if m, ok := c.store.(memoryStats); ok {
		collectMemory(ch, "main", m)
	}
	if f, ok := c.store.(failsafeStats); ok {
		collectFailsafe(ch, f.Stats())
	}
	if c.local != nil {
		collectMemory(ch, "fallback", c.local)
	}
}

// memoryStats is a memory store, as the collector sees it.
type memoryStats interface{ Stats() memstore.Stats }

// failsafeStats is a failsafe store, as the collector sees it.
type failsafeStats interface{ Stats() failsafe.Stats }

func collectMemory(ch chan<- prometheus.Metric, label string, m memoryStats) {
	st := m.Stats()
	ch <- prometheus.MustNewConstMetric(memKeysDesc, prometheus.GaugeValue, float64(st.Keys), label)
	ch <- prometheus.MustNewConstMetric(memDrainedDesc, prometheus.CounterValue, float64(st.Drained), label)
	ch <- prometheus.MustNewConstMetric(memEvictionsDesc, prometheus.CounterValue, float64(st.Evictions), label)
	ch <- prometheus.MustNewConstMetric(memBytesDesc, prometheus.GaugeValue, float64(st.Bytes), label)
	ch <- prometheus.MustNewConstMetric(memMaxBytesDesc, prometheus.GaugeValue, float64(st.MaxBytes), label)
}

func collectFailsafe(ch chan<- prometheus.Metric, st failsafe.Stats) {
	down := 0.0
	if st.Down {
		down = 1
	}
	ch <- prometheus.MustNewConstMetric(storeDownDesc, prometheus.GaugeValue, down)
	ch <- prometheus.MustNewConstMetric(storeFailuresDesc, prometheus.CounterValue, float64(st.Failures))
	ch <- prometheus.MustNewConstMetric(storeFallbacksDesc, prometheus.CounterValue, float64(st.Open), "open")
	ch <- prometheus.MustNewConstMetric(storeFallbacksDesc, prometheus.CounterValue, float64(st.Closed), "closed")
	ch <- prometheus.MustNewConstMetric(storeFallbacksDesc, prometheus.CounterValue, float64(st.Local), "local")
	ch <- prometheus.MustNewConstMetric(storeTripsDesc, prometheus.CounterValue, float64(st.Trips))
	ch <- prometheus.MustNewConstMetric(storeRecoveriesDesc, prometheus.CounterValue, float64(st.Recoveries))
}

var (
	envoyRequestsDesc = prometheus.NewDesc("floodgate_envoy_requests_total",
		"Envoy rate-limit requests (gRPC and POST /json) by result: ok, over_limit, error.", []string{"result"}, nil)
	envoyShadowDesc = prometheus.NewDesc("floodgate_envoy_shadow_total",
		"Envoy requests answered OK that shadow mode kept from being OVER_LIMIT.", nil, nil)
	envoyUnknownDesc = prometheus.NewDesc("floodgate_envoy_unknown_domain_total",
		"Envoy requests for a domain the configuration does not have.", nil, nil)
)

// envoyCollector reads the Envoy service's counts at each scrape.
type envoyCollector struct{ s *envoyrls.Service }

func (c envoyCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c envoyCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Stats()
	ch <- prometheus.MustNewConstMetric(envoyRequestsDesc, prometheus.CounterValue, float64(st.OK), "ok")
	ch <- prometheus.MustNewConstMetric(envoyRequestsDesc, prometheus.CounterValue, float64(st.OverLimit), "over_limit")
	ch <- prometheus.MustNewConstMetric(envoyRequestsDesc, prometheus.CounterValue, float64(st.Errors), "error")
	ch <- prometheus.MustNewConstMetric(envoyShadowDesc, prometheus.CounterValue, float64(st.Shadow))
	ch <- prometheus.MustNewConstMetric(envoyUnknownDesc, prometheus.CounterValue, float64(st.UnknownDomain))
}
