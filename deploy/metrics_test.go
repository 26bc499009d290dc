package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/server"
)

// promName is an identifier in PromQL; quoted strings are removed first.
var (
	promName   = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promString = regexp.MustCompile(`"(\\.|[^"\\])*"|'(\\.|[^'\\])*'`)
)

// metricNames are the names of floodgate's, Go's and the process's metrics
// that expr queries.
func metricNames(expr string) []string {
	var names []string
	for _, id := range promName.FindAllString(promString.ReplaceAllString(expr, `""`), -1) {
		for _, prefix := range []string{"floodgate_", "go_", "process_"} {
			if strings.HasPrefix(id, prefix) {
				names = append(names, id)
			}
		}
	}
	return names
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`sum by (le) (rate(floodgate_x_bucket{result="floodgate_not", job=~"$job"}[5m])) / go_goroutines`)
	if strings.Join(got, " ") != "floodgate_x_bucket go_goroutines" {
		t.Errorf("metricNames: %q", got)
	}
}

// queries are the PromQL expressions of the dashboard and the alert rules,
// by where they are.
func queries(t *testing.T) map[string]string {
	t.Helper()
	qs := map[string]string{}
	for i, g := range list(readYAML(t, "prometheus/alerts.yaml")[0], "groups") {
		for j, r := range list(g, "rules") {
			if str(r, "alert") == "" || str(r, "expr") == "" || str(r, "labels", "severity") == "" {
				t.Errorf("prometheus/alerts.yaml group %d rule %d: want alert, expr and labels.severity", i, j)
			}
			qs["prometheus/alerts.yaml "+str(r, "alert")] = str(r, "expr")
		}
	}
	data, err := os.ReadFile("grafana/floodgate.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("grafana/floodgate.json: %v", err)
	}
	walkQueries(dash, "grafana/floodgate.json", qs)
	if len(qs) < 10 {
		t.Fatalf("%d queries in the dashboard and the alerts: %q", len(qs), qs)
	}
	return qs
}

// walkQueries adds the expr and query strings under v to qs.
func walkQueries(v any, where string, qs map[string]string) {
	switch v := v.(type) {
	case object:
		for k, sub := range v {
			if s, ok := sub.(string); ok && (k == "expr" || k == "query") {
				qs[where+" "+str(v, "refId")+str(v, "name")+" "+s[:min(len(s), 40)]] = s
			}
			walkQueries(sub, where, qs)
		}
	case []any:
		for _, sub := range v {
			walkQueries(sub, where, qs)
		}
	}
}

// TestDashboardAndAlertsQueryExportedMetrics checks that every metric the
// dashboard and the alert rules query is one that serve exports: it runs
// two real servers, one on the memory store, one whose Redis does not
// answer, gets each to count what it counts, and reads their /metrics.
func TestDashboardAndAlertsQueryExportedMetrics(t *testing.T) {
	exported := map[string]bool{}
	for name := range scrapeMemoryServer(t) {
		exported[name] = true
	}
	for name := range scrapeFailingServer(t) {
		exported[name] = true
	}
	for where, expr := range queries(t) {
		for _, name := range metricNames(expr) {
			if !exported[name] {
				t.Errorf("%s queries %s, which floodgate serve does not export", where, name)
			}
		}
	}
	if t.Failed() {
		var names []string
		for n := range exported {
			names = append(names, n)
		}
		sort.Strings(names)
		t.Logf("exported: %s", strings.Join(names, " "))
	}
}

// running is a server.Run of a test.
type running struct {
	addrs  map[string]string
	reload chan struct{}
}

// runServer runs server.Run with o, on loopback ports, until the test
// ends.
func runServer(t *testing.T, o server.Options) *running {
	t.Helper()
	r := &running{addrs: map[string]string{}, reload: make(chan struct{})}
	var mu sync.Mutex
	ready := make(chan struct{})
	o.HTTPAddr, o.GRPCAddr, o.MetricsAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	o.Reload = r.reload
	o.Listening = func(name string, addr net.Addr) {
		mu.Lock()
		defer mu.Unlock()
		if name == "ready" || name == "unready" {
			close(ready)
			return
		}
		r.addrs[name] = addr.String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server.Run: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("server.Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("server.Run did not serve within 30s")
	}
	mu.Lock()
	defer mu.Unlock()
	return r
}

// post posts body to path on r's HTTP API and returns the status.
func (r *running) post(t *testing.T, path, body string) int {
	t.Helper()
	resp, err := http.Post("http://"+r.addrs["http"]+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// scrape returns the names of the samples r's /metrics can have
// (familyNames).
func (r *running) scrape(t *testing.T) map[string]bool {
	t.Helper()
	return familyNames(scrapeText(t, r.addrs["metrics"]))
}

// scrapeText returns the /metrics of the server whose metrics address is
// addr.
func scrapeText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// familyNames returns the names of the samples the /metrics text can
// have: for each family, its name, or a histogram's _bucket, _sum and
// _count.
func familyNames(text string) map[string]bool {
	names := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		switch f[3] {
		case "histogram":
			names[f[2]+"_bucket"], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
		case "summary":
			names[f[2]], names[f[2]+"_sum"], names[f[2]+"_count"] = true, true, true
		default:
			names[f[2]] = true
		}
	}
	return names
}

// scrapeUntil scrapes r until it has every name of want (things counted
// in the background: snapshots, reloads), for at most 10 s.
func (r *running) scrapeUntil(t *testing.T, want ...string) map[string]bool {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		names := r.scrape(t)
		missing := 0
		for _, w := range want {
			if !names[w] {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			return names
		}
		time.Sleep(20 * time.Millisecond) // polling for a real background write
	}
}

// scrapeMemoryServer runs serve on the memory store, with few keys (for
// evictions), a snapshot, the envoy ConfigMap's configuration, and a
// reload; it checks, denies and answers Envoy, then scrapes.
func scrapeMemoryServer(t *testing.T) map[string]bool {
	dir := t.TempDir()
	envoyDir := filepath.Join(dir, "envoy")
	writeConfigMap(t, kubernetes(t)["ConfigMap/floodgate-envoy"], envoyDir)
	cfg := filepath.Join(dir, "floodgate.yaml")
	if err := os.WriteFile(cfg, []byte("policies: {tiny: fixed-window 1/1h, shaped: token-bucket 1/1s}\nstore: {max_keys: 2}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	every := 10 * time.Millisecond
	r := runServer(t, server.Options{Store: "memory", ConfigFile: cfg, EnvoyConfigDir: envoyDir,
		SnapshotFile: filepath.Join(dir, "snapshot"), SnapshotInterval: &every, WatchInterval: -1})
	for _, key := range []string{"a", "b", "c", "a", "a"} {
		r.post(t, "/v1/check", `{"policy":"tiny","key":"`+key+`"}`)
	}
	for range 2 { // the second waits its turn: a delayed check
		r.post(t, "/v1/check", `{"policy":"shaped","key":"s","max_wait":5}`)
	}
	r.post(t, "/json", `{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}`)
	r.reload <- struct{}{}
	return r.scrapeUntil(t, "floodgate_snapshot_writes_total", "floodgate_config_reloads_total", "floodgate_memory_evictions_total")
}

// scrapeFailingServer runs serve on a Redis that does not answer (a port
// nothing listens on), fail-closed, checks, and scrapes.
func scrapeFailingServer(t *testing.T) map[string]bool {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a port nothing listens on: connections are refused
	r := runServer(t, server.Options{Store: "redis://" + addr, SnapshotFile: "off", WatchInterval: -1})
	if code := r.post(t, "/v1/check", `{"policy":"default","key":"a"}`); code != http.StatusServiceUnavailable {
		t.Errorf("a check on a Redis that does not answer: %d, want 503", code)
	}
	return r.scrape(t)
}

// offWithSnapshotOff are the metrics that a server with --snapshot off,
// as the Deployment has, does not export.
var offWithSnapshotOff = map[string]bool{
	"floodgate_snapshot_writes_total":                   true,
	"floodgate_snapshot_last_success_timestamp_seconds": true,
}

// afterReload are the metrics that a server exports from its first
// reload of a configuration on, which the Deployment's test does not do.
var afterReload = map[string]bool{
	"floodgate_config_reloads_total":          true,
	"floodgate_config_last_reload_successful": true,
}

// TestDashboardUnderDeployment runs the Deployment's floodgate
// (startDeployment: its flags, its ConfigMaps, a real Redis), shapes and
// denies with its policies, and checks its live /metrics against the
// dashboard and the alerts: every metric they query is there, but the
// snapshot's, which --snapshot off leaves out, and no timestamp reads 0
// (a panel would show it as 56 years ago).
func TestDashboardUnderDeployment(t *testing.T) {
	addrs := startDeployment(t)
	post := func(body string) {
		resp, err := http.Post("http://"+addrs["http"]+"/v1/check", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for range 40 { // default's burst is 20, then one per 0.6s: the last ones wait their turn
		post(`{"policy":"default","key":"shaped","max_wait":30}`)
	}
	post(`{"policy":"default","key":"shaped"}`) // denied
	text := scrapeText(t, addrs["metrics"])
	exported := familyNames(text)
	for where, expr := range queries(t) {
		for _, name := range metricNames(expr) {
			if !exported[name] && !offWithSnapshotOff[name] && !afterReload[name] {
				t.Errorf("%s queries %s, which the Deployment's floodgate does not export", where, name)
			}
		}
	}
	for name := range offWithSnapshotOff {
		if exported[name] {
			t.Errorf("the Deployment's floodgate (--snapshot off) exports %s", name)
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) == 2 && strings.HasSuffix(f[0], "_timestamp_seconds") && f[1] == "0" {
			t.Errorf("the Deployment's floodgate exports %s: a time 56 years ago", line)
		}
	}
	if !regexp.MustCompile(`(?m)^floodgate_delayed_total\{policy="default"\} [1-9]`).MatchString(text) {
		t.Errorf("the Deployment's floodgate does not count the delayed checks in floodgate_delayed_total{policy=\"default\"}")
	}
}
