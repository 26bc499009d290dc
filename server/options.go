package server

import (
	"log/slog"
	"net"
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/envoyrls"
)

// The default addresses of the serve command: envoyproxy/ratelimit's
// ports, on loopback only.
const (
	DefaultHTTPAddr    = "127.0.0.1:8080"
	DefaultGRPCAddr    = "127.0.0.1:8081"
	DefaultMetricsAddr = "127.0.0.1:6070"
)

// The defaults of Options' durations.
const (
	DefaultShutdownTimeout = 15 * time.Second
	DefaultWatchInterval   = time.Second
)

// Options are Run's settings: where to listen and what to read, as the
// serve command's flags give them. Everything else is in the configuration
// file.
type Options struct {
	// Store is the store's URL (storeurl.Open); "" means memory.
	Store string
	// HTTPAddr is the JSON API's address; "" means DefaultHTTPAddr. A
	// port of 0 picks a free one (see Listening).
	HTTPAddr string
	// GRPCAddr is the address of Envoy's rate-limit service over gRPC,
	// served only with EnvoyConfigDir, beside gRPC's health service
	// ("ratelimit" and the service's name SERVING when Server.Ready, ""
	// until shutdown); "" means DefaultGRPCAddr.
	GRPCAddr string
	// MetricsAddr is the address of the operations endpoints
	// (OpsHandler): /metrics, /healthz, /readyz and, with Pprof,
	// /debug/pprof; "" means none.
	MetricsAddr string
	// Pprof serves the Go profiler on MetricsAddr (WithPprof).
	Pprof bool
	// ConfigFile is the configuration file (see Config); "" means
	// DefaultConfig.
	ConfigFile string
	// EnvoyConfigDir holds envoyproxy/ratelimit's configuration files:
	// with it, Run serves Envoy's rate-limit service over gRPC and at
	// POST /json.
	EnvoyConfigDir string
	// EnvoyShadowMode answers every Envoy request OK (envoyrls.WithShadowMode).
	EnvoyShadowMode bool
	// EnvoyResponseHeaders are the rate-limit header fields of Envoy's
	// answers (envoyrls.WithResponseHeaders); the zero value, none.
	EnvoyResponseHeaders envoyrls.Headers
	// EnvoyQuotaMode puts every Envoy descriptor in quota mode
	// (envoyrls.WithQuotaMode).
	EnvoyQuotaMode bool
	// EnvoyDynamicMetadata has Envoy's answers carry dynamic metadata
	// (envoyrls.WithDynamicMetadata).
	EnvoyDynamicMetadata bool
	// EnvoyFlushInterval is how often the Envoy service writes to the
	// store the hits it answered from memory, those over a fixed window's
	// limit (envoyrls.WithFlushInterval); 0 means
	// envoyrls.DefaultFlushInterval, negative means none are: every hit
	// goes to the store.
	EnvoyFlushInterval time.Duration
	// EnvoyTableCounters counts Envoy's fixed windows on a Redis store's
	// tables, through its decisions' script, as before Redis counters of
	// their own were the default (redisstore.WithCounters(false)): for a
	// fleet upgraded one instance at a time from such a version, until
	// every instance runs this one. Other stores count on tables anyway.
	EnvoyTableCounters bool
	// MaxMemoryBytes bounds the memory store's memory, ahead of the
	// configuration's store.max_bytes; 0 means the configuration's.
	MaxMemoryBytes int64
	// SetMemoryLimit has Run set the Go runtime's soft memory limit
	// (debug.SetMemoryLimit) from the stores' bounds, unless GOMEMLIMIT is
	// set: floodgate serve does, a program that embeds Run may not want a
	// process-wide setting. See instance.limitMemory.
	SetMemoryLimit bool
	// DenyCacheBytes bounds the cache of denied keys of a Redis or file
	// store (storeurl.WithDenyCache), which answers floods over the limit
	// without Redis or a transaction; 0 means DefaultDenyCacheBytes,
	// negative means no cache.
	DenyCacheBytes int64
	// SnapshotFile is the memory store's snapshot, ahead of the
	// configuration's; "off" means none. DefaultSnapshotFile is used
	// when neither names one; with no name at all, no snapshot is kept.
	SnapshotFile, DefaultSnapshotFile string
	// SnapshotInterval, when not nil, is how often the snapshot is
	// written, ahead of the configuration's (default
	// DefaultSnapshotInterval); 0 means only at shutdown.
	SnapshotInterval *time.Duration
	// ShutdownTimeout bounds a graceful shutdown: requests under way get
	// this long to finish. 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// WatchInterval is how often the configuration files are looked at
	// for changes; 0 means DefaultWatchInterval, negative means never
	// (only Reload reloads).
	WatchInterval time.Duration
	// Token is the bearer token when the configuration names no token
	// file (from $FLOODGATE_TOKEN); "" means none.
	Token string
	// Logger logs; nil discards.
	Logger *slog.Logger
	// Clock is the time of decisions and snapshots; nil means the
	// system's.
	Clock clock.Clock
	// Reload reloads the configurations (SIGHUP) at each receive.
	Reload <-chan struct{}
	// Listening, if not nil, is called with each listener's name (http,
	// grpc, metrics) and bound address once it listens, then, once
	// everything is serving, with "ready" and the HTTP address when the
	// store answered a peek, or "unready" when it did not (Run serves
	// anyway: the failure mode decides until the store answers, and
	// /readyz tells when it does).
	Listening func(name string, addr net.Addr)
}

// DefaultDenyCacheBytes is the bound that floodgate serve gives the deny
// cache of a Redis or file store unless told otherwise: room for about
// 200,000 keys on Redis.
const DefaultDenyCacheBytes = 32 << 20
