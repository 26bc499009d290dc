package server

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/storeurl"
)

// running is a Run in a goroutine of the test.
type running struct {
	addrs  map[string]string // by listener name
	done   chan error
	cancel context.CancelFunc
	clock  *clock.Fake
	reload chan struct{}
}

// startRun starts Run with o (on a fake clock, loopback ports picked by the
// system unless o names them) and waits until it is ready. The test ends it
// with stop, or its cleanup does.
func startRun(t *testing.T, o Options) *running {
	t.Helper()
	r := &running{addrs: map[string]string{}, done: make(chan error, 1), reload: make(chan struct{})}
	if o.Clock == nil {
		r.clock = clock.NewFake(t0)
		o.Clock = r.clock
	}
	o.HTTPAddr = cmpOr0s(o.HTTPAddr, "127.0.0.1:0")
	o.GRPCAddr = cmpOr0s(o.GRPCAddr, "127.0.0.1:0")
	o.MetricsAddr = cmpOr0s(o.MetricsAddr, "127.0.0.1:0")
	o.Reload = r.reload
	if o.Logger == nil {
		w := &testWriter{}
		o.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
		t.Cleanup(func() { // after Run's end, the cleanup below
			if t.Failed() {
				w.mu.Lock()
				t.Logf("Run's log:\n%s", &w.b)
				w.mu.Unlock()
			}
		})
	}
	var mu sync.Mutex
	ready := make(chan struct{})
	o.Listening = func(name string, addr net.Addr) {
		mu.Lock()
		defer mu.Unlock()
		if name == "ready" || name == "unready" {
			r.addrs[name] = addr.String()
			close(ready)
			return
		}
		r.addrs[name] = addr.String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- Run(ctx, o) }()
	select {
	case <-ready:
	case err := <-r.done:
		cancel()
		t.Fatalf("Run: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("Run did not get ready in 20s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Error("Run did not return in 20s")
		}
	})
	return r
}

func cmpOr0s(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// stop shuts Run down and returns its error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return in 20s")
		return nil
	}
}

func (r *running) url(path string) string { return "http://" + r.addrs["http"] + path }

// testWriter keeps a Run's logs, for a test that fails.
type testWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	return len(p), nil
}

// patientStore returns a configuration file that gives the store a
// timeout of 10s, not the default 100ms, which a loaded machine can miss:
// for tests of exact decisions on a real Redis, not of latency.
func patientStore(t *testing.T) string {
	cfg := filepath.Join(t.TempDir(), "patient.yaml")
	writeFile(t, cfg, "store: {timeout: 10s}\n")
	return cfg
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The configuration file is reloaded when it changes and on Reload; an
// invalid one is refused, logged and counted, and the old one serves on.
func TestRunReload(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "floodgate.yaml")
	writeFile(t, cfgPath, "policies: {a: fixed-window 1/1h}\n")
	r := startRun(t, Options{ConfigFile: cfgPath, SnapshotFile: "off"})
	policies := func() string { return do(t, "GET", r.url("/v1/policies"), "").body }
	if p := policies(); !strings.Contains(p, `"name":"a"`) {
		t.Fatalf("policies %s", p)
	}
	// A change, seen at the next look.
	r.clock.WaitTimers(1)
	writeFile(t, cfgPath, "policies: {b: fixed-window 2/1h}\n")
	r.clock.Advance(DefaultWatchInterval)
	r.clock.WaitTimers(1) // the watcher has reloaded and sleeps again
	if p := policies(); !strings.Contains(p, `"name":"b"`) || strings.Contains(p, `"name":"a"`) {
		t.Errorf("after a change: %s", p)
	}
	// An invalid file: refused, the old configuration stays.
	writeFile(t, cfgPath, "policies: {c: fixed-window 0/1h}\n")
	r.clock.Advance(DefaultWatchInterval)
	r.clock.WaitTimers(1)
	if p := policies(); !strings.Contains(p, `"name":"b"`) {
		t.Errorf("after an invalid change: %s", p)
	}
	// Reload, the signal's way, without waiting for the watcher.
	writeFile(t, cfgPath+".new", "policies: {d: sliding-log 3/1m}\n")
	if err := os.Rename(cfgPath+".new", cfgPath); err != nil {
		t.Fatal(err)
	}
	r.reload <- struct{}{}
	r.reload <- struct{}{} // the first is done once the second is received
	if p := policies(); !strings.Contains(p, `"name":"d"`) {
		t.Errorf("after Reload: %s", p)
	}
	// The second reload may still be under way: wait for its count.
	m := scrape(t, r)
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(m, `result="success"} 3`) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond) // for the reloading goroutine, not for the clock
		m = scrape(t, r)
	}
	for _, want := range []string{
		`floodgate_config_reloads_total{config="floodgate",result="failure"} 1`,
		`floodgate_config_reloads_total{config="floodgate",result="success"} 3`,
		`floodgate_config_last_reload_successful{config="floodgate"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if err := r.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
}

func scrape(t *testing.T, r *running) string {
	t.Helper()
	resp, err := http.Get("http://" + r.addrs["metrics"] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The memory store's state survives a graceful restart through the
// snapshot, and the periodic snapshot holds the state of its time.
func TestRunSnapshot(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "state", "snap")
	every := 10 * time.Second
	o := Options{SnapshotFile: snap, SnapshotInterval: &every, ConfigFile: ""}
	r := startRun(t, o)
	spend := func(r *running, key string, n int) {
		for range n {
			if a := do(t, "POST", r.url("/v1/check"), `{"policy_text":"fixed-window 10/24h","key":"`+key+`"}`); a.json["allowed"] != true {
				t.Fatalf("spending: %s", a.body)
			}
		}
	}
	remaining := func(r *running, key string) any {
		return do(t, "POST", r.url("/v1/check"), `{"policy_text":"fixed-window 10/24h","key":"`+key+`","cost":0}`).json["remaining"]
	}
	spend(r, "a", 3)
	// The periodic snapshot, at 10s, holds a's 3.
	r.clock.WaitTimers(1)
	r.clock.Advance(every)
	r.clock.WaitTimers(1)
	spend(r, "b", 4) // after the periodic snapshot: only the final one has it
	periodic := memstore.New(0)
	f, err := os.Open(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := periodic.ReadSnapshot(f, r.clock.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if k := periodic.Stats().Keys; k != 1 {
		t.Errorf("the periodic snapshot holds %d keys, want a's 1", k)
	}
	// Another server cannot use the same snapshot file.
	o2 := o
	o2.Clock = clock.NewFake(t0)
	if err := Run(context.Background(), o2); !errors.Is(err, ErrSnapshotInUse) {
		t.Errorf("a second server on the snapshot: %v, want ErrSnapshotInUse", err)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	r2 := startRun(t, o)
	if a, b := remaining(r2, "a"), remaining(r2, "b"); a != 7.0 || b != 6.0 {
		t.Errorf("after a restart: a has %v left, b %v; want 7 and 6", a, b)
	}
	if m := scrape(t, r2); !strings.Contains(m, `floodgate_memory_keys{store="main"} 2`) {
		t.Errorf("after a restart, /metrics: %s", grep(m, "floodgate_memory_keys"))
	}
	r2.stop(t)
	// A corrupt snapshot is moved aside, and the server starts empty.
	if err := os.WriteFile(snap, []byte("FGSNAP\x01garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	r3 := startRun(t, o)
	if a := remaining(r3, "a"); a != 10.0 {
		t.Errorf("after a corrupt snapshot: a has %v left, want 10", a)
	}
	if _, err := os.Stat(snap + ".corrupt"); err != nil {
		t.Errorf("the corrupt snapshot was not kept aside: %v", err)
	}
}

func grep(text, word string) string {
	var out []string
	for line := range strings.Lines(text) {
		if strings.Contains(line, word) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// A shutdown lets a request under way finish: the server stops being
// ready, then answers the request, then returns.
func TestRunGracefulShutdown(t *testing.T) {
	r := startRun(t, Options{SnapshotFile: "off"})
	body, bodyW := io.Pipe()
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", r.url("/v1/check"), body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- answer{code: -1, body: err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answered <- answer{code: resp.StatusCode, body: string(b)}
	}()
	bodyW.Write([]byte(`{"policy":"default",`))
	waitFor(t, "the request to be under way", func() bool {
		return strings.Contains(scrape(t, r), `floodgate_requests_in_flight{api="http"} 1`)
	})
	r.cancel()
	waitFor(t, "readyz to say shutting down", func() bool {
		resp, err := http.Get("http://" + r.addrs["metrics"] + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	select {
	case err := <-r.done:
		t.Fatalf("Run returned with a request under way: %v", err)
	default:
	}
	bodyW.Write([]byte(`"key":"k"}`))
	bodyW.Close()
	if a := <-answered; a.code != 200 || !strings.Contains(a.body, `"allowed":true`) {
		t.Errorf("the request under way: %d %s", a.code, a.body)
	}
	if err := r.stop(t); err != nil {
		t.Errorf("Run: %v", err)
	}
}

// waitFor polls cond every 10ms for up to 10s: for another goroutine or
// process to get somewhere, never for time to pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunStartErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "policies: {a: nope}")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		name string
		o    Options
		want error
		msg  string
	}{
		{"bad config", Options{ConfigFile: bad}, ErrInvalidConfig, "invalid policy"},
		{"missing config", Options{ConfigFile: filepath.Join(dir, "none.yaml")}, ErrInvalidConfig, "no such file"},
		{"bad store", Options{Store: "mongodb://x"}, storeurl.ErrInvalidURL, "--store"},
		{"address in use", Options{HTTPAddr: busy.Addr().String(), SnapshotFile: "off"}, nil, "address already in use"},
		{"missing envoy config", Options{EnvoyConfigDir: filepath.Join(dir, "none"), SnapshotFile: "off"}, nil, "--envoy-config"},
	} {
		c.o.Clock = clock.NewFake(t0)
		c.o.MetricsAddr = "127.0.0.1:0"
		err := Run(context.Background(), c.o)
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %v containing %q", c.name, err, c.want, c.msg)
		}
	}
}

// certs makes a CA, a server certificate for 127.0.0.1 and a client
// certificate, in dir: ca.pem, server.pem, server.key, client.pem,
// client.key.
func certs(t *testing.T, dir string) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write := func(name, typ string, der []byte) {
		writeFile(t, filepath.Join(dir, name), string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})))
	}
	caKey := key()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	write("ca.pem", "CERTIFICATE", caDER)
	caCert, _ := x509.ParseCertificate(caDER)
	for i, name := range []string{"server", "client"} {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		write(name+".pem", "CERTIFICATE", der)
		kb, _ := x509.MarshalECPrivateKey(k)
		write(name+".key", "EC PRIVATE KEY", kb)
	}
}

// Both APIs over mutual TLS with a bearer token: the JSON API and Envoy's
// ShouldRateLimit over gRPC, as Envoy calls it.
func TestRunTLSAndEnvoy(t *testing.T) {
	r := startTLSRun(t)
	testHTTPS(t, r)
	rls := testEnvoyGRPC(t, r)
	testEnvoyJSON(t, r)
	m := scrape(t, r.running)
	for _, want := range []string{
		`floodgate_envoy_requests_total{result="ok"} 3`,
		`floodgate_envoy_requests_total{result="over_limit"} 1`,
		`floodgate_requests_total{api="grpc",code="Unauthenticated",endpoint="ShouldRateLimit"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grep(m, "envoy"))
		}
	}
	testEnvoyReload(t, r, rls)
}

// tlsRun is a Run serving both APIs over mutual TLS with the bearer token
// s3cret, Envoy's domain edge allowing 2 requests a minute per
// remote_address, and what its clients need.
type tlsRun struct {
	*running
	envoyDir   string
	pool       *x509.CertPool
	clientCert tls.Certificate
}

func startTLSRun(t *testing.T) *tlsRun {
	t.Helper()
	dir := t.TempDir()
	certs(t, dir)
	writeFile(t, filepath.Join(dir, "token"), "s3cret\n")
	cfgPath := filepath.Join(dir, "floodgate.yaml")
	writeFile(t, cfgPath, `
auth: {token_file: token}
tls: {cert_file: server.pem, key_file: server.key, client_ca_file: ca.pem}
`)
	envoyDir := filepath.Join(dir, "envoy")
	os.Mkdir(envoyDir, 0o700)
	writeFile(t, filepath.Join(envoyDir, "edge.yaml"), `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 2}
`)
	r := &tlsRun{running: startRun(t, Options{ConfigFile: cfgPath, EnvoyConfigDir: envoyDir, SnapshotFile: "off"}),
		envoyDir: envoyDir, pool: x509.NewCertPool()}
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	r.pool.AppendCertsFromPEM(caPEM)
	var err error
	if r.clientCert, err = tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")); err != nil {
		t.Fatal(err)
	}
	return r
}

// httpsClient trusts the test CA, and shows the client certificate if
// withCert.
func (r *tlsRun) httpsClient(withCert bool) *http.Client {
	tc := &tls.Config{RootCAs: r.pool}
	if withCert {
		tc.Certificates = []tls.Certificate{r.clientCert}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}
}

// testHTTPS checks the JSON API over TLS: a client certificate and the
// token are both needed, and plain HTTP is refused.
func testHTTPS(t *testing.T, r *tlsRun) {
	t.Helper()
	post := func(hc *http.Client, token string) (int, error) {
		req, _ := http.NewRequest("POST", "https://"+r.addrs["http"]+"/v1/check", strings.NewReader(`{"policy":"default","key":"k"}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(r.httpsClient(true), "s3cret"); err != nil || code != 200 {
		t.Errorf("https with a client certificate and the token: %d %v", code, err)
	}
	if code, err := post(r.httpsClient(true), ""); err != nil || code != 401 {
		t.Errorf("https without the token: %d %v", code, err)
	}
	if _, err := post(r.httpsClient(false), "s3cret"); err == nil {
		t.Error("https without a client certificate was served")
	}
	if resp, err := http.Post("http://"+r.addrs["http"]+"/v1/check", "application/json", strings.NewReader(`{}`)); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest { // net/http's answer to plain HTTP on a TLS port
			t.Errorf("plain HTTP to the TLS port: %d", resp.StatusCode)
		}
	}
}

// envoyClient calls ShouldRateLimit over gRPC as Envoy does, with the
// token.
type envoyClient struct {
	rls    rlsv3.RateLimitServiceClient
	authed context.Context
}

// ask asks about remote_address addr in the domain edge.
func (c envoyClient) ask(ctx context.Context, addr string) (*rlsv3.RateLimitResponse, error) {
	return c.rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "remote_address", Value: addr}}}}})
}

// testEnvoyGRPC checks ShouldRateLimit over gRPC: the token is needed, and
// the third request of a minute is over the limit of 2.
func testEnvoyGRPC(t *testing.T, r *tlsRun) envoyClient {
	t.Helper()
	conn, err := grpc.NewClient(r.addrs["grpc"], grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: r.pool, Certificates: []tls.Certificate{r.clientCert}})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	c := envoyClient{rls: rlsv3.NewRateLimitServiceClient(conn), authed: metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret")}
	if _, err := c.ask(ctx, "10.0.0.1"); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC without the token: %v", err)
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := c.ask(c.authed, "10.0.0.1")
		if err != nil || resp.GetOverallCode() != want {
			t.Errorf("gRPC call %d: %v %v, want %v", i, resp.GetOverallCode(), err, want)
		}
	}
	return c
}

// testEnvoyJSON checks POST /json, Envoy's JSON form, on the HTTP API with
// the same auth.
func testEnvoyJSON(t *testing.T, r *tlsRun) {
	t.Helper()
	jreq, _ := http.NewRequest("POST", "https://"+r.addrs["http"]+"/json",
		strings.NewReader(`{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.2"}]}]}`))
	jreq.Header.Set("Authorization", "Bearer s3cret")
	resp, err := r.httpsClient(true).Do(jreq)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"overallCode":"OK"`) {
		t.Errorf("POST /json: %d %s", resp.StatusCode, b)
	}
}

// testEnvoyReload checks that an Envoy configuration change is reloaded,
// and an invalid one refused.
func testEnvoyReload(t *testing.T, r *tlsRun, c envoyClient) {
	t.Helper()
	writeFile(t, filepath.Join(r.envoyDir, "edge.yaml"), "domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 0}\n")
	r.clock.WaitTimers(2)
	r.clock.Advance(DefaultWatchInterval)
	r.clock.WaitTimers(2)
	if resp, err := c.ask(c.authed, "10.0.0.9"); err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("after the Envoy configuration's change to 0 a minute: %v %v", resp.GetOverallCode(), err)
	}
	writeFile(t, filepath.Join(r.envoyDir, "edge.yaml"), "domain: edge\ndescriptors: [{key: x, rate_limit: {unit: fortnight, requests_per_unit: 1}}]\n")
	r.clock.Advance(DefaultWatchInterval)
	r.clock.WaitTimers(2)
	if m := scrape(t, r.running); !strings.Contains(m, `floodgate_config_reloads_total{config="envoy",result="failure"} 1`) {
		t.Errorf("an invalid Envoy configuration: %s", grep(m, "reloads"))
	}
}

// An unusable default snapshot place is no reason not to serve; a named
// one is.
func TestRunSnapshotUnusable(t *testing.T) {
	blocker := filepath.Join(t.TempDir(), "file")
	writeFile(t, blocker, "")
	r := startRun(t, Options{DefaultSnapshotFile: filepath.Join(blocker, "snap")})
	if err := r.stop(t); err != nil {
		t.Errorf("with an unusable default snapshot: %v", err)
	}
	err := Run(context.Background(), Options{SnapshotFile: filepath.Join(blocker, "snap"), Clock: clock.NewFake(t0)})
	if err == nil || !strings.Contains(err.Error(), "snapshot") {
		t.Errorf("with an unusable snapshot file: %v", err)
	}
}

// The logs name the store without its password; a store that does not
// answer at the start is said so (unready), not ready.
func TestRunLogsHidePassword(t *testing.T) {
	w := &testWriter{}
	r := startRun(t, Options{Store: "redis://app:s3cret@127.0.0.1:1/0", SnapshotFile: "off",
		Logger: slog.New(slog.NewTextHandler(w, nil))})
	if _, ok := r.addrs["unready"]; !ok {
		t.Errorf("a store that does not answer: Listening was told %v, want unready", r.addrs)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	logs := w.b.String()
	if strings.Contains(logs, "s3cret") || !strings.Contains(logs, "store=redis://app:xxxxx@127.0.0.1:1/0") {
		t.Errorf("the logs show the password, or no store:\n%s", logs)
	}
}

// A store that refuses the password is said so at the start, with Redis's
// reason, not only "does not answer".
func TestRunLogsWhyTheStoreRefuses(t *testing.T) {
	srv := redistest.NewServer(t)
	if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", "good").Err(); err != nil {
		t.Fatal(err)
	}
	w := &testWriter{}
	url := strings.Replace(srv.URL(), "redis://", "redis://:bad@", 1)
	r := startRun(t, Options{Store: url, SnapshotFile: "off", Logger: slog.New(slog.NewTextHandler(w, nil))})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if logs := w.b.String(); !regexp.MustCompile(`does not answer yet".*err=.*WRONGPASS`).MatchString(logs) {
		t.Errorf("the logs do not say that Redis refused the password:\n%s", logs)
	}
}

// With SetMemoryLimit, Run sets the Go runtime's soft memory limit from the
// memory store's bound: the bound, a quarter more, and the headroom.
func TestRunSetsTheMemoryLimit(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOMEMLIMIT is set, and wins")
	}
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	r := startRun(t, Options{SnapshotFile: "off", MaxMemoryBytes: 100 << 20, SetMemoryLimit: true})
	r.stop(t)
	if got, want := debug.SetMemoryLimit(-1), int64(125<<20+memoryHeadroom); got != want {
		t.Errorf("the runtime's memory limit: %d, want %d", got, want)
	}
}

// A configuration refused at the start leaves no trace: the snapshot's
// directory and lock are made only once everything else is accepted.
func TestRunRefusedLeavesNoSnapshot(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	writeFile(t, cfg, "auth: {token_file: missing-token}")
	for name, o := range map[string]Options{
		"a missing token file":      {ConfigFile: cfg},
		"a missing Envoy directory": {EnvoyConfigDir: filepath.Join(dir, "none")},
	} {
		o.Clock, o.SnapshotFile = clock.NewFake(t0), filepath.Join(dir, "state", "snap")
		o.HTTPAddr, o.MetricsAddr = "127.0.0.1:0", "127.0.0.1:0"
		if err := Run(context.Background(), o); err == nil {
			t.Fatalf("%s: Run started", name)
		}
		if _, err := os.Stat(filepath.Join(dir, "state")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: refused, but the snapshot's directory is there (%v)", name, err)
		}
	}
}
