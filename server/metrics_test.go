package server

import (
	"runtime"
	"strings"
	"testing"

	"github.com/floodgate/floodgate"

	"github.com/prometheus/client_golang/prometheus"
)

// metricValue gathers reg and returns the value of the counter or gauge
// name whose labels are those of labels (name, value pairs), or fails t.
func metricValue(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if got[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s%q", name, labels)
	return 0
}

// A live /metrics names the release and the Go version it runs.
func TestBuildInfo(t *testing.T) {
	r := startRun(t, Options{SnapshotFile: "off"})
	want := `floodgate_build_info{goversion="` + runtime.Version() + `",version="` + floodgate.Version + `"} 1`
	if m := scrape(t, r); !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if err := r.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestDelayMetrics checks the shaping metrics: four checks at one instant
// on a bucket of 1 a second, admitted after 0, 1, 2 and 3 seconds, are
// three delayed checks and six seconds of delay; the refused fifth adds
// nothing. A server without snapshots exports no snapshot metrics (a last
// success at 0 would read as 56 years ago).
func TestDelayMetrics(t *testing.T) {
	ts := newTestServer(t, scheduleConfig)
	for range 5 {
		ts.check(t, `{"policy":"api","key":"alice","max_wait":3}`)
	}
	if got := metricValue(t, ts.metrics.reg, "floodgate_delayed_total", "policy", "api"); got != 3 {
		t.Errorf("floodgate_delayed_total %v, want 3", got)
	}
	if got := metricValue(t, ts.metrics.reg, "floodgate_delay_seconds_total", "policy", "api"); got != 6 {
		t.Errorf("floodgate_delay_seconds_total %v, want 6", got)
	}
	mfs, err := ts.metrics.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "floodgate_snapshot_") {
			t.Errorf("a server without snapshots exports %s", mf.GetName())
		}
	}
}
