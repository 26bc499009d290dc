package server

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// serve on a Redis answers a flood over the limit from its deny cache, on
// by default, and /metrics counts the hits; DenyCacheBytes < 0 turns it
// off.
func TestRunDenyCache(t *testing.T) {
	srv := redistest.NewServer(t)
	for _, c := range []struct {
		name  string
		bytes int64
		on    bool
	}{{"default", 0, true}, {"off", -1, false}} {
		t.Run(c.name, func(t *testing.T) {
			srv.Flush(t)
			r := startRun(t, Options{Store: srv.URL(), ConfigFile: patientStore(t), SnapshotFile: "off", DenyCacheBytes: c.bytes})
			check := func() map[string]any {
				return do(t, "POST", r.url("/v1/check"), `{"policy_text":"fixed-window 1/24h","key":"k"}`).json
			}
			if a := check(); a["allowed"] != true {
				t.Fatalf("the first check: %v", a)
			}
			hits := func() string {
				for _, line := range strings.Split(scrape(t, r), "\n") {
					if strings.HasPrefix(line, `floodgate_deny_cache_hits_total{store="main"} `) {
						return strings.TrimPrefix(line, `floodgate_deny_cache_hits_total{store="main"} `)
					}
				}
				return ""
			}
			deadline := time.Now().Add(5 * time.Second)
			for range 50 {
				if a := check(); a["allowed"] != false {
					t.Fatalf("a check over the limit: %v", a)
				}
				if c.on && hits() != "0" && hits() != "" {
					break
				}
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond) // for the cache's fill, a round trip to a real Redis
			}
			h := hits()
			t.Logf("hits %q", h)
			if c.on && (h == "" || h == "0") || !c.on && h != "" {
				t.Errorf("deny cache hits %q; want some with the cache on, none without", h)
			}
			if err := r.stop(t); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// serve on a file store answers a flood over the limit from its deny
// cache too, on by default: the denial that fills it is the last that
// costs a transaction.
func TestRunDenyCacheFile(t *testing.T) {
	for _, c := range []struct {
		name  string
		bytes int64
		want  string
	}{{"default", 0, "3"}, {"off", -1, ""}} {
		t.Run(c.name, func(t *testing.T) {
			url := "file:" + filepath.Join(t.TempDir(), "state.db")
			r := startRun(t, Options{Store: url, SnapshotFile: "off", DenyCacheBytes: c.bytes})
			for i := range 5 { // admitted, denied and filled, then three from the cache
				a := do(t, "POST", r.url("/v1/check"), `{"policy_text":"fixed-window 1/24h","key":"k"}`).json
				if a["allowed"] != (i == 0) {
					t.Fatalf("check %d: %v", i, a)
				}
			}
			h := ""
			for _, line := range strings.Split(scrape(t, r), "\n") {
				if v, ok := strings.CutPrefix(line, `floodgate_deny_cache_hits_total{store="main"} `); ok {
					h = v
				}
			}
			if h != c.want {
				t.Errorf("deny cache hits %q, want %q", h, c.want)
			}
			if err := r.stop(t); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}
