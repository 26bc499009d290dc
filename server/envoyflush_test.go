package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// The hits the Envoy service answered from memory (over their limit) are
// in the store once Run has returned: a second Run on the same Redis
// reads them all, though the first one's flusher never ran (its clock is
// fake and stands still).
func TestRunEnvoyFlushesOnShutdown(t *testing.T) {
	srv := redistest.NewServer(t)
	dir := filepath.Join(t.TempDir(), "envoy")
	os.Mkdir(dir, 0o700)
	writeFile(t, filepath.Join(dir, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 3}\n")
	const hit = `{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`
	const hits = 20
	r := startRun(t, Options{Store: srv.URL(), ConfigFile: patientStore(t), EnvoyConfigDir: dir, SnapshotFile: "off"})
	for i := range hits {
		a := do(t, "POST", r.url("/json"), hit)
		if over := strings.Contains(a.body, "OVER_LIMIT"); over != (i >= 3) {
			t.Fatalf("hit %d: %s", i+1, a.body)
		}
	}
	// The first over the limit went to the store; the 16 after it did not.
	if m, want := scrape(t, r), "floodgate_envoy_from_memory_total 16"; !strings.Contains(m, want) {
		t.Errorf("/metrics lacks %q:\n%s", want, grep(m, "envoy"))
	}
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r = startRun(t, Options{Store: srv.URL(), ConfigFile: patientStore(t), EnvoyConfigDir: dir, SnapshotFile: "off"})
	const read = `{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":"v"}],"limit":{"requestsPerUnit":1000,"unit":"DAY"},"hitsAddend":0}]}`
	a := do(t, "POST", r.url("/json"), read)
	if want := fmt.Sprintf(`"limitRemaining":%d`, 1000-hits); !strings.Contains(a.body, want) {
		t.Errorf("after %d hits and a shutdown, a check under a limit of 1000 answers %s, want %s", hits, a.body, want)
	}
}

// With EnvoyFlushInterval negative, no hit is answered from memory: a
// second Run on the same Redis reads every hit of the first while it
// runs. With the default it reads only those that went to the store (the
// first's flusher, on its fake clock, never runs).
func TestRunEnvoyFlushInterval(t *testing.T) {
	srv := redistest.NewServer(t)
	dir := filepath.Join(t.TempDir(), "envoy")
	os.Mkdir(dir, 0o700)
	writeFile(t, filepath.Join(dir, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 3}\n")
	reader := startRun(t, Options{Store: srv.URL(), ConfigFile: patientStore(t), EnvoyConfigDir: dir, SnapshotFile: "off", EnvoyFlushInterval: -1})
	for _, c := range []struct {
		name  string
		every time.Duration
		want  int
	}{{"default", 0, 4}, {"none", -1, 20}} {
		t.Run(c.name, func(t *testing.T) {
			hit := fmt.Sprintf(`{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":%q}]}]}`, c.name)
			r := startRun(t, Options{Store: srv.URL(), ConfigFile: patientStore(t), EnvoyConfigDir: dir, SnapshotFile: "off", EnvoyFlushInterval: c.every})
			for range 20 {
				do(t, "POST", r.url("/json"), hit)
			}
			read := fmt.Sprintf(`{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":%q}],"limit":{"requestsPerUnit":1000,"unit":"DAY"},"hitsAddend":0}]}`, c.name)
			a := do(t, "POST", reader.url("/json"), read)
			if want := fmt.Sprintf(`"limitRemaining":%d`, 1000-c.want); !strings.Contains(a.body, want) {
				t.Errorf("another instance, after 20 hits: %s, want %s", a.body, want)
			}
		})
	}
}
