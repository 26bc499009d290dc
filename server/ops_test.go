package server

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// get returns the status and body of GET url by hc, with token as bearer
// token when not "".
func get(t *testing.T, hc *http.Client, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The operations port serves the profiler only when asked, never the
// command line, and shows the store's password nowhere. Before, pprof was
// always on and /debug/pprof/cmdline showed --store redis://:PASSWORD@….
func TestRunOpsPortLeaksNothing(t *testing.T) {
	const secret = "s3cret-ops"
	store := "redis://app:" + secret + "@127.0.0.1:1/0"
	off := startRun(t, Options{Store: store, SnapshotFile: "off"})
	if code, _ := get(t, http.DefaultClient, "http://"+off.addrs["metrics"]+"/debug/pprof/", ""); code != http.StatusNotFound {
		t.Errorf("without Pprof, /debug/pprof/: %d, want 404", code)
	}
	on := startRun(t, Options{Store: store, SnapshotFile: "off", Pprof: true})
	base := "http://" + on.addrs["metrics"]
	if code, body := get(t, http.DefaultClient, base+"/debug/pprof/cmdline", ""); code != http.StatusNotFound || !strings.Contains(body, "may hold a secret") {
		t.Errorf("/debug/pprof/cmdline: %d %s, want 404", code, body)
	}
	if code, body := get(t, http.DefaultClient, base+"/debug/pprof/", ""); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Errorf("with Pprof, /debug/pprof/: %d %.200s", code, body)
	}
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/debug/pprof/", "/debug/pprof/goroutine?debug=2",
		"/debug/pprof/heap?debug=1", "/debug/pprof/symbol", "/debug/pprof/cmdline"} {
		if _, body := get(t, http.DefaultClient, base+path, ""); strings.Contains(body, secret) {
			t.Errorf("%s shows the store's password", path)
		}
	}
}

// ops.auth puts /metrics and the profiler behind the API's tokens, and
// ops.tls with client CAs behind a client certificate too; /healthz and
// /readyz stay open to probes, which present neither.
func TestRunOpsAuthAndTLS(t *testing.T) {
	dir := t.TempDir()
	certs(t, dir)
	writeFile(t, filepath.Join(dir, "token"), "s3cret\n")
	cfg := filepath.Join(dir, "floodgate.yaml")
	writeFile(t, cfg, `
auth: {token_file: token}
tls: {cert_file: server.pem, key_file: server.key, client_ca_file: ca.pem}
ops: {auth: true, tls: true}
`)
	r := &tlsRun{running: startRun(t, Options{ConfigFile: cfg, SnapshotFile: "off", Pprof: true})}
	r.pool = x509.NewCertPool()
	caPEM, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	r.pool.AppendCertsFromPEM(caPEM)
	var err error
	if r.clientCert, err = tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")); err != nil {
		t.Fatal(err)
	}
	hc, base := r.httpsClient(true), "https://"+r.addrs["metrics"]
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", 401}, {"/metrics", "wrong", 401}, {"/metrics", "s3cret", 200},
		{"/debug/pprof/", "", 401}, {"/debug/pprof/", "s3cret", 200},
		{"/healthz", "", 200}, {"/readyz", "", 200},
	} {
		if code, body := get(t, hc, base+c.path, c.token); code != c.want {
			t.Errorf("GET %s with token %q: %d %.100s, want %d", c.path, c.token, code, body, c.want)
		}
	}
	// A probe presents no client certificate (kubelet's do not): /healthz
	// and /readyz answer it; the rest of the port asks for one.
	noCert := r.httpsClient(false)
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/healthz", "", 200}, {"/readyz", "", 200},
		{"/metrics", "s3cret", 403}, {"/debug/pprof/", "s3cret", 403},
	} {
		code, body := get(t, noCert, base+c.path, c.token)
		if code != c.want {
			t.Errorf("GET %s without a client certificate: %d %.100s, want %d", c.path, code, body, c.want)
		}
		if code == 403 && !strings.Contains(body, "client certificate signed by tls.client_ca_file") {
			t.Errorf("GET %s without a client certificate: %q does not say why", c.path, body)
		}
	}
	if resp, err := http.Get("http://" + r.addrs["metrics"] + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest { // net/http's answer to plain HTTP on a TLS port
			t.Errorf("plain HTTP to the TLS ops port: %d", resp.StatusCode)
		}
	}
}

func TestOpsConfigErrors(t *testing.T) {
	if _, err := ParseConfig([]byte("ops: {tls: true}"), "."); err == nil || !strings.Contains(err.Error(), "ops.tls needs") {
		t.Errorf("ops.tls without tls: %v", err)
	}
	cfg, err := ParseConfig([]byte("ops: {auth: true}"), ".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(nil, cfg); err == nil || !strings.Contains(err.Error(), "ops.auth needs a token") {
		t.Errorf("ops.auth without a token: %v", err)
	}
}
