package server

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/floodgate/floodgate/memstore"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/envoyrls"
	"github.com/floodgate/floodgate/store"
)

// Run serves floodgate's rate-limit service until ctx is done, then shuts
// down gracefully: it stops answering /readyz, lets requests under way
// finish (up to ShutdownTimeout), writes the memory store's snapshot and
// closes the store. It returns nil after a graceful shutdown, and an error
// when it cannot start (a bad configuration, a store URL, an address in
// use) or a listener fails.
//
// Run is the whole of the serve command but its flags and signals: the
// store (storeurl.Open, wrapped in a failsafe.Store unless it is the
// memory store), the configuration and its reloads (on a change of its
// files, looked at every WatchInterval, and on each receive from Reload;
// an invalid one is logged and the old one kept), the HTTP API, Envoy's
// service over gRPC, the metrics, and the snapshot.
func Run(ctx context.Context, o Options) error {
	in := newInstance(o)
	defer in.release()
	if err := in.loadConfig(); err != nil {
		return err
	}
	if err := in.openStore(); err != nil {
		return err
	}
	in.limitMemory()
	// The services read the files the configuration names: a refusal
	// comes before the snapshot makes its directory and lock.
	if err := in.buildServices(); err != nil {
		return err
	}
	if err := in.startSnapshot(); err != nil {
		return err
	}
	if err := in.listen(); err != nil {
		return err
	}
	in.serve()
	in.startBackground()
	in.announce(ctx)
	return in.shutdown(in.wait(ctx))
}

// instance is one Run: what it has opened and serves, each field set by
// the step of Run that opens it (the method named after the step, in the
// file of its concern), and released by shutdown and release.
type instance struct {
	o       Options
	log     *slog.Logger
	clk     clock.Clock
	metrics *metrics // the Server's, the snapshot's and the reloads'

	// loadConfig
	cfg      *Config // as read at the start
	cfgPrint string  // the fingerprint of its files as read, for the watch

	// openStore
	store      store.Store
	mem        *memstore.Store // store, when it is the memory store; else nil
	local      *memstore.Store // the failsafe's local store, for FailLocal; else nil
	closeStore func()

	// startSnapshot
	snap *snapshotter // nil when no snapshot is kept

	// buildServices
	srv        *Server
	envoy      *envoyrls.Service // nil without EnvoyConfigDir
	envoyPrint string            // the fingerprint of its files as read, for the watch

	// listen and serve
	lns      listeners
	httpSrv  *http.Server
	opsSrv   *http.Server
	grpcSrv  *grpcServer // nil without envoy
	serving  sync.WaitGroup
	serveErr chan error // a server's failure

	// startBackground
	stopBackground func()
}

// newInstance returns the instance of a Run with o, before its first step:
// Options' defaults filled in, the metrics made, nothing opened.
func newInstance(o Options) *instance {
	in := &instance{o: o, log: o.Logger, clk: o.Clock, metrics: newMetrics(prometheus.NewRegistry()),
		closeStore: func() {}, serveErr: make(chan error, 3), stopBackground: func() {}}
	if in.log == nil {
		in.log = slog.New(slog.DiscardHandler)
	}
	if in.clk == nil {
		in.clk = clock.Real{}
	}
	return in
}

// startBackground starts what runs beside the APIs until the shutdown:
// the watches of the configurations, their reloads on Options.Reload and
// the periodic snapshot.
func (in *instance) startBackground() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	in.startReloads(ctx, &wg)
	in.startSnapshotLoop(ctx, &wg)
	in.stopBackground = func() {
		cancel()
		wg.Wait()
	}
}

// announce logs that Run serves, and tells Options.Listening whether the
// store answered: "ready", or "unready" (the failure mode decides until
// it answers, and /readyz says when it does).
func (in *instance) announce(ctx context.Context) {
	in.log.Info("serving", "store", storeName(in.o.Store), "policies", len(in.cfg.policies0()), "envoy", in.envoy != nil)
	name := "ready"
	if err := in.srv.Ready(ctx); err != nil {
		name = "unready"
		in.log.Warn("serving, but the store does not answer yet", "store", storeName(in.o.Store), "err", errors.Unwrap(err))
	}
	if in.o.Listening != nil {
		in.o.Listening(name, in.lns.http.Addr())
	}
}

// wait returns when ctx is done, with nil, or when a server fails, with
// its error.
func (in *instance) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		in.log.Info("shutting down", "timeout", in.shutdownTimeout())
		return nil
	case err := <-in.serveErr:
		in.log.Error("a listener failed: shutting down", "err", err)
		return err
	}
}

// shutdown stops what Run started, gracefully: the background work, then
// readiness, then the APIs, whose requests under way get ShutdownTimeout
// to finish; then it writes the snapshot. It returns err, wait's, joined
// with the snapshot's.
func (in *instance) shutdown(err error) error {
	in.stopBackground()
	in.srv.SetReady(false)
	ctx, cancel := context.WithTimeout(context.Background(), in.shutdownTimeout())
	defer cancel()
	in.stopServing(ctx)
	if in.envoy != nil {
		// The hits it answered from memory, before the snapshot and the
		// store's close.
		if ferr := in.envoy.Close(ctx); ferr != nil {
			in.log.Error("envoy: writing the hits answered from memory", "err", ferr)
		}
	}
	if serr := in.saveSnapshot(); serr != nil {
		err = errors.Join(err, serr)
	}
	in.log.Info("stopped")
	return err
}

func (in *instance) shutdownTimeout() time.Duration {
	return cmp.Or(in.o.ShutdownTimeout, DefaultShutdownTimeout)
}

// release releases what the steps opened, after a shutdown or a start that
// failed: the snapshot's lock, then the store. (listen closes its
// listeners itself when it fails; once served, the servers own them.)
func (in *instance) release() {
	if in.snap != nil {
		in.snap.close()
	}
	in.closeStore()
}
