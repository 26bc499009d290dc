package server

import (
	"fmt"
	"runtime"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/envoyrls"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/prommetrics"
	"github.com/floodgate/floodgate/store"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the Server's Prometheus metrics (see the serve command's
// usage for the list): the limiters' and the store's are package
// prommetrics's, labelled by policy name ("inline" for policy_text) and
// store (main, and fallback for a failsafe store's local one).
type metrics struct {
	reg         *prometheus.Registry
	limits      *prommetrics.Collector   // decisions, stores
	requests    *prometheus.CounterVec   // api, endpoint, code
	latency     *prometheus.HistogramVec // api, endpoint
	inFlight    *prometheus.GaugeVec     // api
	reloads     *prometheus.CounterVec   // config, result
	reloadOK    *prometheus.GaugeVec     // config
	snapshots   *prometheus.CounterVec   // result; registered by openSnapshot
	snapshotAge prometheus.Gauge         // registered by openSnapshot
	delayed     *prometheus.CounterVec   // policy
	delay       *prometheus.CounterVec   // policy
}

// latencyBuckets go from 25µs to about 0.8s, doubling.
var latencyBuckets = prometheus.ExponentialBuckets(25e-6, 2, 16)

func newMetrics(reg *prometheus.Registry) *metrics {
	m := &metrics{
		reg:    reg,
		limits: prommetrics.New(),
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
		delayed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_delayed_total",
			Help: "Checks admitted with a delay (a max_wait, shaping), by policy.",
		}, []string{"policy"}),
		delay: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_delay_seconds_total",
			Help: "The delays of the checks admitted with one, added up, in seconds, by policy.",
		}, []string{"policy"}),
	}
	reg.MustRegister(m.limits, m.requests, m.latency, m.inFlight, m.reloads, m.reloadOK, m.delayed, m.delay,
		buildInfo(), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// registerSnapshots adds the snapshot metrics, for a server that writes
// snapshots: without one, a last-success time of 0 would read as a
// snapshot 56 years old.
func (m *metrics) registerSnapshots() error {
	for _, c := range []prometheus.Collector{m.snapshots, m.snapshotAge} {
		if err := m.reg.Register(c); err != nil {
			return fmt.Errorf("the snapshot metrics: %w", err)
		}
	}
	return nil
}

// observeDelay counts a check of policy admitted after a wait of d, if
// any.
func (m *metrics) observeDelay(policy string, d time.Duration) {
	if d > 0 {
		m.delayed.WithLabelValues(policy).Inc()
		m.delay.WithLabelValues(policy).Add(d.Seconds())
	}
}

// buildInfo is floodgate_build_info, always 1, labelled with
// floodgate.Version and the Go version it was built with.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "floodgate_build_info",
		Help:        "Always 1, labelled with floodgate's release (version) and the Go version that built it (goversion).",
		ConstLabels: prometheus.Labels{"version": floodgate.Version, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// registerStore adds the counts of the store (label main) and of the
// failsafe store's local memory store, if any (label fallback).
func (m *metrics) registerStore(s store.Store, local *memstore.Store) error {
	if err := m.limits.AddStore("main", s); err != nil {
		return err
	}
	if local != nil {
		return m.limits.AddStore("fallback", local)
	}
	return nil
}

var (
	envoyRequestsDesc = prometheus.NewDesc("floodgate_envoy_requests_total",
		"Envoy rate-limit requests (gRPC and POST /json) by result: ok, over_limit, error.", []string{"result"}, nil)
	envoyShadowDesc = prometheus.NewDesc("floodgate_envoy_shadow_total",
		"Envoy requests answered OK that shadow mode kept from being OVER_LIMIT.", nil, nil)
	envoyUnknownDesc = prometheus.NewDesc("floodgate_envoy_unknown_domain_total",
		"Envoy requests for a domain the configuration does not have.", nil, nil)
	envoyMemoryDesc = prometheus.NewDesc("floodgate_envoy_from_memory_total",
		"Envoy descriptors answered without the store: hits on fixed-window counters known over their limit.", nil, nil)
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
	ch <- prometheus.MustNewConstMetric(envoyMemoryDesc, prometheus.CounterValue, float64(st.FromMemory))
}
