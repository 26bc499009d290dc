package server

import (
	"log/slog"
	"sync"

	"github.com/floodgate/floodgate/envoyrls"
)

// reloader reloads the configurations.
type reloader struct {
	mu    sync.Mutex // one reload at a time
	srv   *Server
	envoy *envoyrls.Service
	o     Options
	log   *slog.Logger
	m     *metrics
}

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
