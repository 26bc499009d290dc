package server

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// probeKey and probePolicy are what /readyz peeks at: a peek changes
// nothing, and no one else uses this name.
const (
	probeName = "floodgate-readyz"
	probeKey  = "probe"
)

var probePolicy = algo.MustParsePolicy("fixed-window 1/1s")

// readyTimeout bounds /readyz's question to the store.
const readyTimeout = time.Second

// OpsHandler returns the operations endpoints (serve them on a private
// address; the configuration's ops section adds authentication and TLS):
//
//	GET /metrics        Prometheus metrics (behind ops.auth, and a client
//	                    certificate with ops.tls and tls.client_ca_file)
//	GET /healthz        200 while the process serves; never asks for a
//	                    token or a client certificate (for kubelet probes)
//	GET /readyz         200 when the store answers a peek, else 503; as /healthz
//	/debug/pprof/...    the Go profiler, with WithPprof (as /metrics),
//	                    but never its cmdline: a command line may hold a secret
func (s *Server) OpsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.opsAuth(promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`+"\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Ready(r.Context()); err != nil {
			writeError(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, []byte(`{"status":"ready"}`+"\n"))
	})
	if s.pprof {
		mux.Handle("/debug/pprof/", s.opsAuth(http.HandlerFunc(pprof.Index)))
		mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, r *http.Request) {
			writeError(w, http.StatusNotFound, "the command line is not served: it may hold a secret")
		})
		mux.Handle("/debug/pprof/profile", s.opsAuth(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", s.opsAuth(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", s.opsAuth(http.HandlerFunc(pprof.Trace)))
	}
	return mux
}

// healthcheck answers envoyproxy/ratelimit's GET /healthcheck, which
// Handler serves on the API's port, so that what probes the upstream
// service probes floodgate unchanged: 200 with the body "OK" (text/plain)
// when Ready, else 500 with no body, as upstream answers. Like upstream's,
// it takes any method and no token. /readyz on the operations port says
// the same with a reason.
func (s *Server) healthcheck(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["X-Content-Type-Options"] = []string{"nosniff"}
	if err := s.Ready(r.Context()); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	h["Content-Type"] = []string{"text/plain; charset=utf-8"}
	w.Write([]byte("OK"))
}

// opsAuth asks h's requests for a bearer token of the API when the
// configuration in use has ops.auth, and, on a TLS connection when it has
// client CAs, for a client certificate they signed (the operations port
// verifies one only if given, for probes: opsTLSConfig).
func (s *Server) opsAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := s.cur.Load()
		if r.TLS != nil && l.tls != nil && l.tls.clientCAs != nil && len(r.TLS.VerifiedChains) == 0 {
			writeError(w, http.StatusForbidden, "a client certificate signed by tls.client_ca_file is needed here; only /healthz and /readyz take none")
			return
		}
		if l.cfg.Ops.Auth && !s.authorized(w, r, l) {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// readyError is Ready's answer when not ready: what /readyz says, and
// the store's error behind it, for the log (a probe's answer does not
// show a store's address or refusal).
type readyError struct {
	msg   string
	cause error
}

func (e *readyError) Error() string { return e.msg }
func (e *readyError) Unwrap() error { return e.cause }

// Ready returns nil when the Server is ready to decide: not shutting down,
// and its store (unwrapped from a failsafe.Store, whose failure mode would
// answer for it) answers a peek within a second.
func (s *Server) Ready(ctx context.Context) error {
	if !s.ready.Load() {
		return &readyError{msg: "shutting down"}
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	t, err := s.probe.Table(probeName, probePolicy)
	if err == nil {
		_, err = t.Decide(ctx, probeKey, s.clock.Now().UnixNano(), 0)
	}
	if err != nil {
		s.log.Debug("not ready", "err", err)
		return &readyError{msg: "the store does not answer", cause: err}
	}
	return nil
}
