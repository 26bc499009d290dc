package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
)

// serve serves each API on its listener, which its server then owns, in a
// goroutine of its own: the JSON API (over TLS when the configuration has
// it), Envoy's service over gRPC, and the metrics. A server that fails
// sends its error to serveErr.
func (in *instance) serve() {
	errLog := slog.NewLogLogger(in.log.Handler(), slog.LevelDebug)
	in.httpSrv = &http.Server{Handler: in.srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, ErrorLog: errLog}
	// No WriteTimeout: a CPU profile or a trace writes for as long as asked.
	in.opsSrv = &http.Server{Handler: in.srv.OpsHandler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, ErrorLog: errLog}
	if in.envoy != nil {
		in.grpcSrv = newGRPCServer(in.srv, in.envoy)
	}
	in.serveOne("http", func() error {
		if tc := in.srv.TLSConfig("h2", "http/1.1"); tc != nil {
			in.httpSrv.TLSConfig = tc
			return in.httpSrv.ServeTLS(in.lns.http, "", "")
		}
		return in.httpSrv.Serve(in.lns.http)
	})
	if in.grpcSrv != nil {
		in.serveOne("grpc", func() error { return in.grpcSrv.serve(in.lns.grpc) })
	}
	if in.lns.metrics != nil {
		in.serveOne("metrics", func() error {
			if tc := in.srv.opsTLSConfig(); tc != nil && in.cfg.Ops.TLS {
				in.opsSrv.TLSConfig = tc
				return in.opsSrv.ServeTLS(in.lns.metrics, "", "")
			}
			return in.opsSrv.Serve(in.lns.metrics)
		})
	}
}

// serveOne runs serve, the server of the API name, in a goroutine; its
// error, unless a stop caused it, goes to serveErr.
func (in *instance) serveOne(name string, serve func() error) {
	in.serving.Go(func() {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, grpc.ErrServerStopped) {
			in.serveErr <- fmt.Errorf("%s: %w", name, err)
		}
	})
}

// stopServing stops the servers gracefully and waits for their
// goroutines: the JSON API and gRPC together, their requests under way
// cut off when ctx is done; then the metrics, which stay up until the API
// is down, for a last scrape.
func (in *instance) stopServing(ctx context.Context) {
	var wg sync.WaitGroup
	if in.grpcSrv != nil {
		in.grpcSrv.health.shutdown()
		wg.Go(func() { in.grpcSrv.stop(ctx, in.log) })
	}
	wg.Go(func() {
		if err := in.httpSrv.Shutdown(ctx); err != nil {
			in.log.Warn("requests under way at the shutdown timeout were cut off", "api", "http", "err", err)
			in.httpSrv.Close()
		}
	})
	wg.Wait()
	in.opsSrv.Shutdown(ctx)
	in.serving.Wait()
}
