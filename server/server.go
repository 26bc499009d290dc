package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
	"github.com/prometheus/client_golang/prometheus"
)

// Server is floodgate's rate-limit service over HTTP: the JSON API
// (Handler) and the operations endpoints (OpsHandler), deciding on one
// Store with the policies of its Config. Run wires a Server to listeners,
// the Envoy rate-limit service, reloads and snapshots; a Server alone is
// what tests and programs that embed the service use.
//
// Its configuration can be replaced while it serves (SetConfig): requests
// under way finish with the old one. A Server is safe for concurrent use.
type Server struct {
	store   store.Store // what limiters decide on
	probe   store.Store // what readiness asks: store, unwrapped from its Failsafe
	clock   clock.Clock
	log     *slog.Logger
	token   string // from the environment, when the configuration names no token file
	metrics *metrics
	envoy   http.Handler    // Envoy's POST /json, or nil
	pprof   bool            // OpsHandler serves /debug/pprof/ (WithPprof)
	local   *memstore.Store // the failsafe store's local store, for metrics, or nil

	cur   atomic.Pointer[live]
	ready atomic.Bool

	mu     sync.Mutex
	inline map[string]*floodgate.Limiter // by the policy's text; bounded by limits.maxInline
}

// live is what a configuration makes: the Server's state between reloads.
type live struct {
	cfg      *Config
	policies []namedPolicy
	limiters map[string]*floodgate.Limiter // by policy name
	limits   limits
	tokens   []tokenHash
	tls      *serverTLS
}

// An Option configures New.
type Option interface{ apply(*Server) }

type optionFunc func(*Server)

func (f optionFunc) apply(s *Server) { f(s) }

// WithClock makes the Server decide on c's time (a clock.Fake in tests);
// the default is the system's clock.
func WithClock(c clock.Clock) Option { return optionFunc(func(s *Server) { s.clock = c }) }

// WithLogger logs to l; the default discards. Tokens are never logged.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(s *Server) { s.log = l }) }

// WithToken sets the bearer token that requests must carry when the
// configuration names no token file; "" (the default) means none.
func WithToken(token string) Option { return optionFunc(func(s *Server) { s.token = token }) }

// WithPprof serves the Go profiler (net/http/pprof) under /debug/pprof/ in
// OpsHandler; without it there is none. Its /debug/pprof/cmdline is never
// served: a command line may hold a secret, such as a store's password.
func WithPprof() Option { return optionFunc(func(s *Server) { s.pprof = true }) }

// WithEnvoyJSON serves h, the Envoy rate-limit service's JSON form, at
// POST /json, behind the same authentication as the API.
func WithEnvoyJSON(h http.Handler) Option { return optionFunc(func(s *Server) { s.envoy = h }) }

// withMetrics makes a Server use m, which Run shares with the snapshot and
// reloads.
func withMetrics(m *metrics) Option { return optionFunc(func(s *Server) { s.metrics = m }) }

// withFallback names the local store of store's failsafe.Store, for its
// metrics.
func withFallback(m *memstore.Store) Option {
	return optionFunc(func(s *Server) { s.local = m })
}

// New returns a Server deciding on st with cfg (nil: DefaultConfig). It
// reads the files cfg names (the token file, TLS certificates); an error
// there, or in cfg, wraps ErrInvalidConfig. The Server is ready (its
// /readyz asks the store) until SetReady(false).
func New(st store.Store, cfg *Config, opts ...Option) (*Server, error) {
	s := &Server{store: st, probe: st, clock: clock.Real{}, inline: make(map[string]*floodgate.Limiter)}
	for _, o := range opts {
		o.apply(s)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.metrics == nil {
		s.metrics = newMetrics(prometheus.NewRegistry())
	}
	if w, ok := st.(interface{ Unwrap() store.Store }); ok {
		s.probe = w.Unwrap() // a wrapper such as a failsafe.Store would answer for a failing store
	}
	if cfg == nil {
		cfg = DefaultConfig()
	}
	if err := s.SetConfig(cfg); err != nil {
		return nil, err
	}
	if err := s.metrics.registerStore(st, s.local); err != nil {
		return nil, fmt.Errorf("server: the store's metrics: %w", err)
	}
	s.ready.Store(true)
	return s, nil
}

// SetConfig makes cfg the Server's configuration, from the next request
// on: its policies, limits, tokens and TLS certificates. On an error
// (wrapping ErrInvalidConfig) nothing changes. A policy whose name and
// policy are unchanged keeps its keys' state; a name given another policy
// keeps its keys' spent units, converted by algo.Policy.Convert, on every
// store (memory, file, Redis).
func (s *Server) SetConfig(cfg *Config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	nps, err := cfg.policies()
	if err != nil {
		return err
	}
	tokens, err := cfg.readTokens(s.token)
	if err != nil {
		return err
	}
	if cfg.Ops.Auth && len(tokens) == 0 {
		return fmt.Errorf("%w: ops.auth needs a token: auth.token_file, or $FLOODGATE_TOKEN", ErrInvalidConfig)
	}
	st, err := cfg.readTLS()
	if err != nil {
		return err
	}
	if old := s.cur.Load(); st == nil && old != nil {
		st = old.tls // TLS goes off only at a restart: the listeners are TLS listeners
	}
	l := &live{cfg: cfg, policies: nps, limiters: make(map[string]*floodgate.Limiter, len(nps)),
		limits: cfg.limits(), tokens: tokens, tls: st}
	for _, np := range nps {
		lim, err := floodgate.NewLimiter(np.policy, floodgate.WithStore(s.store), floodgate.WithClock(s.clock), floodgate.WithName(np.name),
			floodgate.WithObserver(s.metrics.limits.Observer(np.name)))
		if err != nil {
			return fmt.Errorf("%w: policy %q: %w", ErrInvalidConfig, np.name, err)
		}
		l.limiters[np.name] = lim
	}
	s.cur.Store(l)
	return nil
}

// Config returns the configuration in use.
func (s *Server) Config() *Config { return s.cur.Load().cfg }

// SetReady sets whether /readyz may answer that the Server is ready (it
// still asks the store): Run clears it when shutting down, so that load
// balancers stop sending requests before the listeners close.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// TLSConfig returns a TLS configuration for a listener that serves the
// certificates of the configuration in use at each handshake, so that a
// reload renews them, offering nextProtos in ALPN (h2 and http/1.1 for
// HTTP, h2 for gRPC); nil when the configuration has no TLS. With
// tls.client_ca_file, every client must present a certificate it signed.
func (s *Server) TLSConfig(nextProtos ...string) *tls.Config {
	return s.tlsConfig(tls.RequireAndVerifyClientCert, nextProtos)
}

// opsTLSConfig is TLSConfig for the operations port, where a client
// certificate is verified if given but not required, so that probes
// (a kubelet's, which presents none) reach /healthz and /readyz; opsAuth
// asks for one on the other endpoints.
func (s *Server) opsTLSConfig() *tls.Config {
	return s.tlsConfig(tls.VerifyClientCertIfGiven, []string{"http/1.1"})
}

// tlsConfig is TLSConfig with the client authentication it asks for when
// the configuration has client CAs.
func (s *Server) tlsConfig(clientAuth tls.ClientAuthType, nextProtos []string) *tls.Config {
	if s.cur.Load().tls == nil {
		return nil
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			st := s.cur.Load().tls
			if st == nil {
				return nil, fmt.Errorf("TLS is off in the current configuration")
			}
			c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*st.cert},
				NextProtos: nextProtos}
			if st.clientCAs != nil {
				c.ClientCAs, c.ClientAuth = st.clientCAs, clientAuth
			}
			return c, nil
		},
	}
}
