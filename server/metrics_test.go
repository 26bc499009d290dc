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
