package server

import (
	"cmp"
	"context"
	"log/slog"
	"sync"

	"github.com/floodgate/floodgate/envoyrls"
)

// loadConfig reads the configuration file, if Options name one, and the
// fingerprint of its files for the watch.
func (in *instance) loadConfig() error {
	in.cfg = DefaultConfig()
	if in.o.ConfigFile == "" {
		return nil
	}
	before := fingerprint(in.o.ConfigFile)
	cfg, err := LoadConfig(in.o.ConfigFile)
	if err != nil {
		return err
	}
	in.cfg = cfg
	in.cfgPrint = fingerprint(configFiles(in.o.ConfigFile, cfg)...)
	if fingerprint(in.o.ConfigFile) != before {
		in.cfgPrint = "" // it changed while being read: reload at the first look
	}
	return nil
}

// startReloads starts the goroutines that reload the configurations, in wg
// until ctx is done: a watch of each configuration's files, looked at
// every Options.WatchInterval (unless negative), and a reload of both at
// each receive from Options.Reload.
func (in *instance) startReloads(ctx context.Context, wg *sync.WaitGroup) {
	r := &reloader{srv: in.srv, envoy: in.envoy, o: in.o, log: in.log, m: in.metrics}
	if in.o.WatchInterval >= 0 {
		every := cmp.Or(in.o.WatchInterval, DefaultWatchInterval)
		if in.o.ConfigFile != "" {
			wg.Go(func() {
				watch(ctx, in.clk, every, in.cfgPrint, r.configFiles, func() { r.reloadConfig("a file changed") })
			})
		}
		if in.envoy != nil {
			wg.Go(func() {
				watch(ctx, in.clk, every, in.envoyPrint, r.envoyFiles, func() { r.reloadEnvoy("a file changed") })
			})
		}
	}
	if in.o.Reload != nil {
		wg.Go(func() { r.onSignal(ctx, in.o.Reload) })
	}
}

// configFiles are the files of the configuration cfg, read from path: the
// file and those it names (tokens, certificates).
func configFiles(path string, cfg *Config) []string {
	return append([]string{path}, cfg.files()...)
}

// reloader reloads the configurations.
type reloader struct {
	mu    sync.Mutex // one reload at a time
	srv   *Server
	envoy *envoyrls.Service
	o     Options
	log   *slog.Logger
	m     *metrics
}

// onSignal reloads both configurations at each receive from reload, until
// ctx is done.
func (r *reloader) onSignal(ctx context.Context, reload <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reload:
			r.reloadConfig("reload signal")
			r.reloadEnvoy("reload signal")
		}
	}
}

// configFiles are the files of the configuration in use, for the watch.
func (r *reloader) configFiles() []string { return configFiles(r.o.ConfigFile, r.srv.Config()) }

// envoyFiles are the files of the Envoy configuration, for the watch.
func (r *reloader) envoyFiles() []string { return []string{r.o.EnvoyConfigDir} }

// reloadConfig reloads floodgate's configuration file, if there is one.
func (r *reloader) reloadConfig(why string) {
	if r.o.ConfigFile == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.srv.Config()
	cfg, err := LoadConfig(r.o.ConfigFile)
	if err == nil {
		err = r.srv.SetConfig(cfg)
	}
	if err != nil {
		r.m.reloads.WithLabelValues("floodgate", "failure").Inc()
		r.m.reloadOK.WithLabelValues("floodgate").Set(0)
		r.log.Error("the configuration was not reloaded: the previous one stays", "config", r.o.ConfigFile, "why", why, "err", err)
		return
	}
	r.m.reloads.WithLabelValues("floodgate", "success").Inc()
	r.m.reloadOK.WithLabelValues("floodgate").Set(1)
	r.log.Info("configuration reloaded", "config", r.o.ConfigFile, "why", why, "policies", len(cfg.policies0()))
	for _, what := range restartOnly(old, cfg) {
		r.log.Warn("a changed setting takes effect only at a restart", "setting", what)
	}
}

// restartOnly lists the settings that differ between two configurations
// and only a restart applies.
func restartOnly(old, cur *Config) []string {
	var out []string
	if old.Store != cur.Store {
		out = append(out, "store")
	}
	if old.SnapshotFile() != cur.SnapshotFile() || !equalPtr(old.Snapshot.Interval, cur.Snapshot.Interval) {
		out = append(out, "snapshot")
	}
	if old.TLSEnabled() != cur.TLSEnabled() {
		out = append(out, "tls (on or off)")
	}
	if old.Ops.TLS != cur.Ops.TLS {
		out = append(out, "ops.tls")
	}
	return out
}

func equalPtr[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}

// reloadEnvoy reloads the Envoy configuration directory, if there is one.
func (r *reloader) reloadEnvoy(why string) {
	if r.envoy == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cfg, err := envoyrls.LoadConfig(r.o.EnvoyConfigDir)
	if err != nil {
		r.m.reloads.WithLabelValues("envoy", "failure").Inc()
		r.m.reloadOK.WithLabelValues("envoy").Set(0)
		r.log.Error("the Envoy configuration was not reloaded: the previous one stays", "dir", r.o.EnvoyConfigDir, "why", why, "err", err)
		return
	}
	r.envoy.SetConfig(cfg)
	r.m.reloads.WithLabelValues("envoy", "success").Inc()
	r.m.reloadOK.WithLabelValues("envoy").Set(1)
	r.log.Info("Envoy configuration reloaded", "dir", r.o.EnvoyConfigDir, "why", why, "domains", len(cfg.Domains()))
}
