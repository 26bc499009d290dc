package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/envoyrls"
)

// Run serves floodgate's rate-limit service until ctx is done, then shuts
// down gracefully: it stops answering /readyz, lets requests under way
// finish (up to ShutdownTimeout), writes the memory store's snapshot and
// closes the store. It returns nil after a graceful shutdown, and an error
// when it cannot start (a bad configuration, a store URL, an address in
// use) or a listener fails.
//
// Run is the whole of the serve command but its flags and signals: the
// store (storeurl.Open, wrapped in floodgate.Failsafe unless it is the
// memory store), the configuration and its reloads (on a change of its
// files, looked at every WatchInterval, and on each receive from Reload;
// an invalid one is logged and the old one kept), the HTTP API, Envoy's
// service over gRPC, the metrics, and the snapshot.
func Run(ctx context.Context, o Options) (err error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	cfg := DefaultConfig()
	var cfgPrint string // the configuration's files as read, for the watch
	if o.ConfigFile != "" {
		before := fingerprint(o.ConfigFile)
		if cfg, err = LoadConfig(o.ConfigFile); err != nil {
			return err
		}
		cfgPrint = fingerprint(append([]string{o.ConfigFile}, cfg.files()...)...)
		if fingerprint(o.ConfigFile) != before {
			cfgPrint = "" // it changed while being read: reload at the first look
		}
	}

	// The store.
	store, mem, local, closeStore, err := openStore(o.Store, cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()

	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	var snap *snapshotter
	if mem != nil {
		if snap, err = startSnapshot(o, cfg, mem, clk, log, m); err != nil {
			return err
		}
	}
	if snap != nil {
		defer snap.close()
	}

	// The services.
	var envoy *envoyrls.Service
	opts := []Option{WithClock(clk), WithLogger(log), WithToken(o.Token), withMetrics(m), withFallback(local)}
	var envoyPrint string // the Envoy configuration as read, for the watch
	if o.EnvoyConfigDir != "" {
		envoyPrint = fingerprint(o.EnvoyConfigDir)
		ec, err := envoyrls.LoadConfig(o.EnvoyConfigDir)
		if err != nil {
			return fmt.Errorf("--envoy-config %s: %w", o.EnvoyConfigDir, err)
		}
		envoy = envoyrls.NewService(ec, store, envoyrls.WithClock(clk), envoyrls.WithLogger(log.With("service", "envoy")),
			envoyrls.WithShadowMode(o.EnvoyShadowMode))
		reg.MustRegister(envoyCollector{envoy})
		opts = append(opts, WithEnvoyJSON(envoy.JSONHandler()))
	}
	srv, err := New(store, cfg, opts...)
	if err != nil {
		return err
	}

	// The listeners: all bound before anything is served, so that a busy
	// address fails the start.
	listen := func(name, addr string) (net.Listener, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("%s listener: %w", name, err)
		}
		log.Info("listening", "api", name, "addr", ln.Addr().String(), "tls", name != "metrics" && cfg.TLSEnabled())
		if o.Listening != nil {
			o.Listening(name, ln.Addr())
		}
		return ln, nil
	}
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	httpLn, err := listen("http", cmp.Or(o.HTTPAddr, DefaultHTTPAddr))
	if err != nil {
		return err
	}
	lns = append(lns, httpLn)
	var grpcLn, opsLn net.Listener
	if envoy != nil {
		if grpcLn, err = listen("grpc", cmp.Or(o.GRPCAddr, DefaultGRPCAddr)); err != nil {
			return err
		}
		lns = append(lns, grpcLn)
	}
	if o.MetricsAddr != "" {
		if opsLn, err = listen("metrics", o.MetricsAddr); err != nil {
			return err
		}
		lns = append(lns, opsLn)
	}

	errLog := slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, ErrorLog: errLog}
	opsSrv := &http.Server{Handler: srv.OpsHandler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: errLog}
	var grpcSrv *grpcServer
	if envoy != nil {
		grpcSrv = newGRPCServer(srv, envoy)
	}

	serveErr := make(chan error, 3)
	var wg sync.WaitGroup
	serve := func(name string, f func() error) {
		wg.Go(func() {
			if err := f(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
				serveErr <- fmt.Errorf("%s: %w", name, err)
			}
		})
	}
	serve("http", func() error {
		if tc := srv.TLSConfig("h2", "http/1.1"); tc != nil {
			httpSrv.TLSConfig = tc
			return httpSrv.ServeTLS(httpLn, "", "")
		}
		return httpSrv.Serve(httpLn)
	})
	if grpcSrv != nil {
		serve("grpc", func() error { return grpcSrv.serve(grpcLn) })
	}
	if opsLn != nil {
		serve("metrics", func() error { return opsSrv.Serve(opsLn) })
	}
	lns = nil // the servers close them

	// Reloads and snapshots.
	bg, stopBG := context.WithCancel(context.Background())
	var bgWG sync.WaitGroup
	r := &reloader{srv: srv, envoy: envoy, o: o, log: log, m: m}
	if o.WatchInterval >= 0 {
		every := cmp.Or(o.WatchInterval, DefaultWatchInterval)
		if o.ConfigFile != "" {
			bgWG.Go(func() {
				watch(bg, clk, every, cfgPrint, func() []string { return append([]string{o.ConfigFile}, srv.Config().files()...) },
					func() { r.reloadConfig("a file changed") })
			})
		}
		if envoy != nil {
			bgWG.Go(func() {
				watch(bg, clk, every, envoyPrint, func() []string { return []string{o.EnvoyConfigDir} }, func() { r.reloadEnvoy("a file changed") })
			})
		}
	}
	if o.Reload != nil {
		bgWG.Go(func() {
			for {
				select {
				case <-bg.Done():
					return
				case <-o.Reload:
					r.reloadConfig("reload signal")
					r.reloadEnvoy("reload signal")
				}
			}
		})
	}
	if snap != nil {
		if every := snapshotInterval(o, cfg); every > 0 {
			bgWG.Go(func() { snapshotLoop(bg, clk, every, snap, log) })
		}
	}
	log.Info("serving", "store", storeName(o.Store), "policies", len(cfg.policies0()), "envoy", envoy != nil)
	if o.Listening != nil {
		o.Listening("ready", httpLn.Addr())
	}

	select {
	case <-ctx.Done():
		log.Info("shutting down", "timeout", cmp.Or(o.ShutdownTimeout, DefaultShutdownTimeout))
	case err = <-serveErr:
		log.Error("a listener failed: shutting down", "err", err)
	}
	stopBG()
	bgWG.Wait()
	srv.SetReady(false)
	if grpcSrv != nil {
		grpcSrv.health.Shutdown()
	}
	sctx, cancel := context.WithTimeout(context.Background(), cmp.Or(o.ShutdownTimeout, DefaultShutdownTimeout))
	defer cancel()
	var swg sync.WaitGroup
	swg.Go(func() {
		if err := httpSrv.Shutdown(sctx); err != nil {
			log.Warn("requests under way at the shutdown timeout were cut off", "api", "http", "err", err)
			httpSrv.Close()
		}
	})
	if grpcSrv != nil {
		swg.Go(func() { grpcSrv.stop(sctx, log) })
	}
	swg.Wait()
	// The metrics stay up until the API is down, for a last scrape.
	opsSrv.Shutdown(sctx)
	wg.Wait()
	if snap != nil {
		if serr := snap.save(); serr != nil {
			log.Error("the snapshot at shutdown failed", "snapshot", snap.path, "err", serr)
			err = errors.Join(err, serr)
		} else {
			log.Info("snapshot written", "snapshot", snap.path, "keys", mem.Stats().Keys)
		}
	}
	log.Info("stopped")
	return err
}
