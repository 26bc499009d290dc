package server

import (
	"fmt"

	"github.com/floodgate/floodgate/envoyrls"
)

// buildServices makes the services that Run serves on the store: Envoy's
// rate-limit service, when Options.EnvoyConfigDir names its
// configuration, and the Server, with the metrics they share.
func (in *instance) buildServices() error {
	opts := []Option{WithClock(in.clk), WithLogger(in.log), WithToken(in.o.Token), withMetrics(in.metrics), withFallback(in.local)}
	if in.o.EnvoyConfigDir != "" {
		if err := in.buildEnvoy(); err != nil {
			return err
		}
		opts = append(opts, WithEnvoyJSON(in.envoy.JSONHandler()))
	}
	if in.o.Pprof {
		opts = append(opts, WithPprof())
	}
	srv, err := New(in.store, in.cfg, opts...)
	if err != nil {
		return err
	}
	in.srv = srv
	return nil
}

// buildEnvoy makes Envoy's rate-limit service from the configuration in
// Options.EnvoyConfigDir, its counts among the metrics.
func (in *instance) buildEnvoy() error {
	dir := in.o.EnvoyConfigDir
	in.envoyPrint = fingerprint(dir)
	ec, err := envoyrls.LoadConfig(dir)
	if err != nil {
		return fmt.Errorf("--envoy-config %s: %w", dir, err)
	}
	in.envoy = envoyrls.NewService(ec, in.store, envoyrls.WithClock(in.clk),
		envoyrls.WithLogger(in.log.With("service", "envoy")), envoyrls.WithShadowMode(in.o.EnvoyShadowMode),
		envoyrls.WithResponseHeaders(in.o.EnvoyResponseHeaders), envoyrls.WithQuotaMode(in.o.EnvoyQuotaMode),
		envoyrls.WithDynamicMetadata(in.o.EnvoyDynamicMetadata), envoyrls.WithFlushInterval(in.o.EnvoyFlushInterval))
	in.metrics.reg.MustRegister(envoyCollector{in.envoy})
	return nil
}
