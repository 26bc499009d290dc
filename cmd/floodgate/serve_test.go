package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/floodgate/floodgate/internal/redistest"
)

// serveProc is a running floodgate serve, started by startServe.
type serveProc struct {
	cmd    *exec.Cmd
	addrs  map[string]string // http, grpc, metrics: as printed
	ready  string            // the ready line
	stderr *lockedBuffer
	exited chan struct{} // closed when the process has exited
	code   int
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// serveEnvClean clears the environment variables serve reads, so that the
// tests' own environment does not leak in.
func serveEnvClean() []string {
	var env []string
	for _, v := range serveEnv {
		env = append(env, v+"=")
	}
	return append(env, "FLOODGATE_TOKEN=")
}

// startServe runs floodgate serve with args on loopback ports the system
// picks, and waits until it prints that it is ready.
func startServe(t *testing.T, env []string, args ...string) *serveProc {
	t.Helper()
	args = append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--metrics", "127.0.0.1:0"}, args...)
	cmd := exec.Command(floodgateBinary(t), args...)
	cmd.Env = append(append(os.Environ(), serveEnvClean()...), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, addrs: map[string]string{}, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "floodgate serve: ")
			if !ok {
				continue
			}
			if strings.HasPrefix(line, "ready") || strings.HasPrefix(line, "serving, but") {
				p.ready = line
				close(ready)
				continue
			}
			if name, addr, ok := strings.Cut(line, " "); ok {
				p.addrs[name] = addr
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("floodgate %s: stderr:\n%s", strings.Join(args, " "), p.stderr)
		}
	})
	select {
	case <-ready:
	case <-p.exited:
		t.Fatalf("floodgate serve exited with %d before it was ready:\n%s", p.code, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("floodgate serve was not ready in 30s:\n%s", p.stderr)
	}
	return p
}

// stop sends sig and returns the exit status.
func (p *serveProc) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("floodgate serve did not exit in 30s after %v", sig)
	}
	return p.code
}

func (p *serveProc) url(path string) string { return "http://" + p.addrs["http"] + path }

// call sends a request and returns the status and the body decoded as a
// JSON object.
func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(b) > 0 && json.Unmarshal(b, &out) != nil {
		out = map[string]any{"text": string(b)}
	}
	return resp.StatusCode, out
}

// eventually polls cond every 20ms for up to 10s, for a process to get
// somewhere (never for time to pass).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The README's first run: no configuration, the built-in policy, the
// memory store; then a graceful restart that keeps every key's state in the
// default snapshot.
func TestServeFirstRunAndRestart(t *testing.T) {
	state := t.TempDir()
	env := []string{"XDG_STATE_HOME=" + state}
	p := startServe(t, env)
	if !strings.Contains(p.ready, "try: curl -s -d '{\"policy\":\"default\",\"key\":\"alice\"}' http://127.0.0.1:") {
		t.Errorf("the ready line: %q", p.ready)
	}
	code, d := call(t, "POST", p.url("/v1/check"), `{"policy":"default","key":"alice"}`)
	if code != 200 || d["allowed"] != true || d["remaining"] != 19.0 {
		t.Errorf("the first check: %d %v", code, d)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := call(t, "GET", "http://"+p.addrs["metrics"]+path, ""); code != 200 {
			t.Errorf("%s: %d", path, code)
		}
	}
	if code, m := call(t, "GET", "http://"+p.addrs["metrics"]+"/metrics", ""); code != 200 || !strings.Contains(fmt.Sprint(m), `floodgate_decisions_total{policy="default",result="allowed"} 1`) {
		t.Errorf("/metrics: %d %.300v", code, m)
	}
	readmeCalls(t, p)
	// floodgate client, against it.
	wantRun(t, "client check", runBinary(t, serveEnvClean(), "client", "check", "--server", "http://"+p.addrs["http"], "--policy-text", "sliding-log 10/24h", "k"), 0, "")
	for range 2 {
		call(t, "POST", p.url("/v1/check"), `{"policy_text":"sliding-log 10/24h","key":"k"}`)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit status %d after SIGTERM", code)
	}
	if _, err := os.Stat(filepath.Join(state, "floodgate", "serve.snapshot")); err != nil {
		t.Fatalf("the default snapshot: %v", err)
	}
	// Restarted: k has spent 3 of its 10 a day.
	p2 := startServe(t, env)
	if code, d := call(t, "POST", p2.url("/v1/check"), `{"policy_text":"sliding-log 10/24h","key":"k","cost":0}`); code != 200 || d["remaining"] != 7.0 {
		t.Errorf("after a restart: %d %v, want 7 remaining", code, d)
	}
	if code := p2.stop(t, os.Interrupt); code != 0 {
		t.Errorf("exit status %d after SIGINT", code)
	}
}

// The configuration is reloaded when its file changes and on SIGHUP; an
// invalid one is refused and the old one keeps serving.
func TestServeReload(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "floodgate.yaml")
	write := func(text string) {
		if err := os.WriteFile(cfg+".tmp", []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(cfg+".tmp", cfg); err != nil {
			t.Fatal(err)
		}
	}
	write("policies: {a: fixed-window 1/1h}\n")
	hasPolicy := func(p *serveProc, name string) bool {
		_, out := call(t, "GET", p.url("/v1/policies"), "")
		return strings.Contains(fmt.Sprint(out), "name:"+name+" ")
	}
	metric := func(p *serveProc, want string) bool {
		_, m := call(t, "GET", "http://"+p.addrs["metrics"]+"/metrics", "")
		return strings.Contains(fmt.Sprint(m), want)
	}
	t.Run("file change", func(t *testing.T) {
		p := startServe(t, nil, "--config", cfg, "--snapshot", "off", "--watch-interval", "50ms")
		write("policies: {b: fixed-window 2/1h}\n")
		eventually(t, "policy b", func() bool { return hasPolicy(p, "b") })
		write("policies: {c: fixed-window 0/1h}\n") // invalid
		eventually(t, "a failed reload", func() bool {
			return metric(p, `floodgate_config_reloads_total{config="floodgate",result="failure"} 1`)
		})
		if !hasPolicy(p, "b") {
			t.Error("an invalid configuration replaced the valid one")
		}
		if !strings.Contains(p.stderr.String(), "the configuration was not reloaded") {
			t.Errorf("the refusal was not logged:\n%s", p.stderr)
		}
		p.stop(t, syscall.SIGTERM)
	})
	t.Run("SIGHUP", func(t *testing.T) {
		write("policies: {a: fixed-window 1/1h}\n")
		p := startServe(t, nil, "--config", cfg, "--snapshot", "off", "--watch-interval", "0")
		write("policies: {d: sliding-log 5/1m}\n")
		if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		eventually(t, "policy d after SIGHUP", func() bool { return hasPolicy(p, "d") })
		if hasPolicy(p, "a") {
			t.Error("policy a is still served")
		}
		if code := p.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("exit status %d", code)
		}
	})
}

// Two servers on one Redis decide exactly together: of many concurrent
// requests through both, exactly the limit is admitted.
func TestServeTwoInstancesOnRedis(t *testing.T) {
	srv := redistest.SharedServer(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "floodgate.yaml")
	// The test is of exact sharing, not of latency: a store timeout of 10s
	// (not the default 100ms, which a loaded machine can pass) keeps every
	// call on Redis rather than on the fail mode.
	if err := os.WriteFile(cfg, []byte("policies: {shared: sliding-log 100/1h}\nstore: {timeout: 10s}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("serve-%d", rand.Uint64())
	var procs []*serveProc
	for range 2 {
		procs = append(procs, startServe(t, nil, "--store", srv.URL(), "--config", cfg, "--metrics", "off"))
	}
	var mu sync.Mutex
	allowed, denied := 0, 0
	var wg sync.WaitGroup
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for i := range 32 {
		p := procs[i%2]
		wg.Go(func() {
			for range 10 {
				resp, err := hc.Post(p.url("/v1/check"), "application/json", strings.NewReader(`{"policy":"shared","key":"`+key+`"}`))
				if err != nil {
					t.Error(err)
					return
				}
				var d struct{ Allowed *bool }
				err = json.NewDecoder(resp.Body).Decode(&d)
				resp.Body.Close()
				if err != nil || d.Allowed == nil {
					t.Errorf("%d: %v", resp.StatusCode, err)
					return
				}
				mu.Lock()
				if *d.Allowed {
					allowed++
				} else {
					denied++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if allowed != 100 || denied != 220 {
		t.Errorf("%d allowed and %d denied of 320 requests through 2 servers, want exactly 100 and 220", allowed, denied)
	}
	for _, p := range procs {
		if code := p.stop(t, syscall.SIGTERM); code != 0 {
			t.Errorf("exit status %d", code)
		}
	}
}

// Envoy's rate-limit service over gRPC on the real binary, called with
// go-control-plane's generated client as Envoy would.
func TestServeEnvoyGRPC(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "edge.yaml"), []byte(`domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: path
    value: /health
    rate_limit: {unlimited: true}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, nil, "--envoy-config", dir, "--snapshot", "off")
	conn, err := grpc.NewClient(p.addrs["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rls := rlsv3.NewRateLimitServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: "192.0.2.7"}}},
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "path", Value: "/health"}}},
	}}
	for i, want := range []struct {
		code      rlsv3.RateLimitResponse_Code
		remaining uint32
	}{{rlsv3.RateLimitResponse_OK, 1}, {rlsv3.RateLimitResponse_OK, 0}, {rlsv3.RateLimitResponse_OVER_LIMIT, 0}} {
		resp, err := rls.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		st := resp.GetStatuses()
		if resp.GetOverallCode() != want.code || len(st) != 2 || st[0].GetLimitRemaining() != want.remaining ||
			st[0].GetCurrentLimit().GetRequestsPerUnit() != 2 || st[1].GetCode() != rlsv3.RateLimitResponse_OK {
			t.Errorf("call %d: %v, want %v with %d remaining", i+1, resp, want.code, want.remaining)
		}
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Errorf("exit status %d", code)
	}
}

func TestServeUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"serve", "-h"}, strings.NewReader(""), &stdout, &stderr); code != 0 || stdout.String() != serveUsage {
		t.Errorf("serve -h: %d\n%s%s", code, &stdout, &stderr)
	}
	for name, env := range serveEnv {
		if !strings.Contains(serveUsage, "--"+name+" ") && !strings.Contains(serveUsage, "--"+name+"\n") {
			t.Errorf("the usage does not document --%s", name)
		}
		if !strings.HasPrefix(env, "FLOODGATE_") || env != "FLOODGATE_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_")) {
			t.Errorf("--%s reads $%s", name, env)
		}
	}
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"--nope"}, nil, "unknown flag --nope"},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{[]string{"--log-format", "xml"}, nil, `--log-format "xml"`},
		{[]string{"--log-level", "loud"}, nil, `--log-level "loud"`},
		{[]string{"--snapshot-interval", "-1s"}, nil, "--snapshot-interval -1s"},
		{[]string{"--max-memory", "-1"}, nil, "--max-memory -1"},
		{[]string{"--deny-cache", "-1"}, nil, "--deny-cache -1"},
		{[]string{"--envoy-flush-interval", "-1s"}, nil, "--envoy-flush-interval -1s"},
		{nil, []string{"FLOODGATE_SNAPSHOT_INTERVAL=often"}, "$FLOODGATE_SNAPSHOT_INTERVAL"},
	} {
		r := runBinary(t, append(serveEnvClean(), c.env...), append([]string{"serve"}, c.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %q %q: exit %d, stderr %q; want 2 and %q", c.args, c.env, r.code, r.stderr, c.want)
		}
	}
	// A bad store URL or configuration: exit 2, as the help says; other
	// start failures: exit 1, with the reason.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("policies: {a: nope}\n"), 0o600)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--config", bad}, exitUsage, `policy "a": invalid policy`},
		{[]string{"--store", "mongodb://x"}, exitUsage, "--store"},
		{[]string{"--http", "256.0.0.1:0"}, exitFailure, "http listener"},
	} {
		r := runBinary(t, serveEnvClean(), append([]string{"serve", "--snapshot", "off", "--metrics", "off"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %q: exit %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

// readmeCalls makes the guide's curl calls of the service's API (they
// were the README's), as written, against p, the first run they follow:
// each must succeed.
func readmeCalls(t *testing.T, p *serveProc) {
	t.Helper()
	readme, err := os.ReadFile("../../docs/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(readme), "\\\n", "")
	calls := regexp.MustCompile(`curl -s -d '([^']*)'\s+http://127\.0\.0\.1:8080(/v1/\w+)`).FindAllStringSubmatch(text, -1)
	if len(calls) < 4 {
		t.Fatalf("docs/guide.md has %d curl calls of the API, want at least 4", len(calls))
	}
	for _, c := range calls {
		if code, d := call(t, "POST", p.url(c[2]), c[1]); code != 200 && code != 204 {
			t.Errorf("docs/guide.md's POST %s %s: %d %v", c[2], c[1], code, d)
		}
	}
}

// A store that does not answer at the start is said so, not "ready": the
// service serves anyway, its failure mode deciding.
func TestServeSaysTheStoreDoesNotAnswer(t *testing.T) {
	p := startServe(t, nil, "--store", "redis://127.0.0.1:1", "--snapshot", "off")
	if !strings.HasPrefix(p.ready, "serving, but the store does not answer") {
		t.Errorf("the line after the listeners: %q, want it to say the store does not answer", p.ready)
	}
	if code, _ := call(t, "POST", p.url("/v1/check"), `{"policy":"default","key":"k"}`); code != 503 {
		t.Errorf("a check while the store does not answer: %d, want 503 (fail closed)", code)
	}
}

// With --log-format json, every line serve logs is a JSON record, go-redis's
// own messages too (a dial that failed once Redis was killed): they went
// to standard error as plain lines before.
func TestServeRedisLogsInJSON(t *testing.T) {
	srv := redistest.NewServer(t)
	p := startServe(t, []string{"XDG_STATE_HOME=" + t.TempDir()}, "--store", srv.URL(), "--log-format", "json", "--metrics", "off")
	srv.Kill()
	eventually(t, "go-redis's message of a failed dial", func() bool {
		call(t, "POST", p.url("/v1/check"), `{"policy":"default","key":"k"}`)
		return strings.Contains(p.stderr.String(), "failed to dial")
	})
	p.stop(t, syscall.SIGTERM)
	for _, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a line that is not JSON: %q", line)
		}
	}
}

// Two signals 1 ms apart, as GNU timeout sends them (to serve and to its
// group), never cut the final snapshot short: 20 runs, each exiting 0 with
// its snapshot whole and no temporary file left; a temporary file left by
// a dead writer is removed at start.
func TestServeSecondSignalKeepsTheSnapshot(t *testing.T) {
	dir := t.TempDir()
	snap := filepath.Join(dir, "serve.snapshot")
	stale := snap + ".tmp123456"
	if err := os.WriteFile(stale, []byte("half a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	for run := range 20 {
		p := startServe(t, nil, "--snapshot", snap)
		if _, err := os.Stat(stale); run == 0 && !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the stale temporary file is still there: %v", err)
		}
		body := fmt.Sprintf(`{"checks":[{"policy":"default","key":"run%d"},{"policy_text":"sliding-log 100/24h","key":"k"}]}`, run)
		if code, d := call(t, "POST", p.url("/v1/check"), body); code != 200 {
			t.Fatalf("run %d: checks: %d %v", run, code, d)
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond) // the second signal's timing, not time passing for the limiter
		if code := p.stop(t, os.Interrupt); code != 0 {
			t.Fatalf("run %d: exit status %d after two signals 1 ms apart:\n%s", run, code, p.stderr)
		}
		if left, _ := filepath.Glob(snap + ".tmp*"); len(left) > 0 {
			t.Fatalf("run %d: temporary files left: %v", run, left)
		}
	}
	// Every run's final snapshot was written: k has spent 20 of its 100.
	p := startServe(t, nil, "--snapshot", snap)
	if code, d := call(t, "POST", p.url("/v1/check"), `{"policy_text":"sliding-log 100/24h","key":"k","cost":0}`); code != 200 || d["remaining"] != 80.0 {
		t.Errorf("after 20 runs: %d %v, want 80 remaining", code, d)
	}
	p.stop(t, syscall.SIGTERM)
}

// Durations in the JSON log read as durations, "15s", not as integer
// nanoseconds.
func TestServeLogsReadableDurations(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var b strings.Builder
		o := &serveOptions{logFormat: format}
		o.logger(&b).Info("shutting down", "timeout", 15*time.Second, slog.Group("store", "cooldown", 500*time.Millisecond))
		if out := b.String(); strings.Contains(out, "15000000000") || !strings.Contains(out, "15s") || !strings.Contains(out, "500ms") {
			t.Errorf("%s log: %s; want 15s and 500ms", format, out)
		}
	}
}

// --envoy-table-counters, or its environment variable, asks the server to
// count Envoy's fixed windows on the Redis store's tables
// (server.Options.EnvoyTableCounters); by default it does not.
func TestServeEnvoyTableCounters(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want bool
	}{
		{nil, "", false},
		{[]string{"--envoy-table-counters"}, "", true},
		{nil, "true", true},
	} {
		t.Setenv("FLOODGATE_ENVOY_TABLE_COUNTERS", c.env)
		if c.env == "" {
			os.Unsetenv("FLOODGATE_ENVOY_TABLE_COUNTERS")
		}
		o, err := parseServeArgs(c.args)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.serverOptions(nil).EnvoyTableCounters; got != c.want {
			t.Errorf("serve %q, $FLOODGATE_ENVOY_TABLE_COUNTERS=%q: EnvoyTableCounters %v, want %v", c.args, c.env, got, c.want)
		}
	}
}
