package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
)

// EnvoyTableCounters counts Envoy's fixed windows on the Redis store's
// tables, under its prefix; by default they are on Redis counters of
// their own, whose keys start with "#".
func TestRunEnvoyTableCounters(t *testing.T) {
	srv := redistest.NewServer(t)
	dir := filepath.Join(t.TempDir(), "envoy")
	os.Mkdir(dir, 0o700)
	writeFile(t, filepath.Join(dir, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: day, requests_per_unit: 3}\n")
	const hit = `{"domain":"edge","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}`
	for _, tables := range []bool{true, false} {
		srv.Flush(t)
		r := startRun(t, Options{Store: srv.URL(), ConfigFile: patientStore(t), EnvoyConfigDir: dir, SnapshotFile: "off",
			EnvoyTableCounters: tables})
		if a := do(t, "POST", r.url("/json"), hit); !strings.Contains(a.body, `"overallCode":"OK"`) {
			t.Fatalf("EnvoyTableCounters %v: %s", tables, a.body)
		}
		if err := r.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
		keys, err := srv.Client(t).Keys(context.Background(), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		var tableKeys, counterKeys int
		for _, k := range keys {
			switch {
			case strings.HasSuffix(k, "@policies"): // a name's record of its policies, not a count
			case strings.HasPrefix(k, "floodgate:envoyrls/edge"):
				tableKeys++
			case strings.HasPrefix(k, "#floodgate:envoyrls/edge"):
				counterKeys++
			}
		}
		if tables != (tableKeys == 1 && counterKeys == 0) || !tables != (tableKeys == 0 && counterKeys == 1) {
			t.Errorf("EnvoyTableCounters %v: Redis keys %q, want the window's on the table (\"floodgate:...\") %v, on a counter (\"#floodgate:...\") %v",
				tables, keys, tables, !tables)
		}
	}
}
