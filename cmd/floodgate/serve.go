package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/floodgate/floodgate/envoyrls"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/storeurl"
	"github.com/redis/go-redis/v9"
)

const serveUsage = `Usage: floodgate serve [flags]

Serve runs floodgate's rate-limit service: an HTTP JSON API for programs in
any language, Envoy's rate-limit service (gRPC) for proxies, Prometheus
metrics. With no flags it serves, on loopback only, the policy "default"
(token-bucket 100/1m burst=20) from this process's memory, and keeps that
memory across restarts in a snapshot file. Try:

  floodgate serve &
  curl -s -d '{"policy":"default","key":"alice"}' http://127.0.0.1:8080/v1/check
  {"allowed":true,"remaining":19,"retry_after":0,"reset_after":0.6}

It prints where it listens on standard output, one line each, then a line
starting "floodgate serve: ready" once the store has answered:

  floodgate serve: http 127.0.0.1:8080
  floodgate serve: metrics 127.0.0.1:6070

or, when the store did not answer within a second, one starting
"floodgate serve: serving, but the store does not answer" (it serves
anyway, store.fail_mode deciding until the store answers)

and logs on standard error. SIGTERM or SIGINT shut it down gracefully
(requests under way finish, then the final snapshot is written; further
signals are only logged, SIGKILL stops at once); SIGHUP reloads the
configuration files, as does any change to them. Exit status: 0 after a
graceful shutdown, 2 for a bad flag, store URL or configuration file, 1
when it cannot start otherwise (an address in use) or a listener fails.

HTTP API (JSON bodies; times in seconds, with up to 9 decimals):

  POST /v1/check  {"policy":"default","key":"alice","cost":1}
      policy names a configured policy; or "policy_text":"token-bucket 5/1s"
      gives one inline (keys shared with floodgate check --policy on the
      same store); cost defaults to 1, and 0 peeks without spending.
      -> {"allowed":true,"remaining":19,"retry_after":0,"reset_after":0.6}
      retry_after: the wait after which a refused check would pass (0 when
      allowed); reset_after: until the key is back to its initial state.
  POST /v1/check  {"policy":"default","key":"alice","max_wait":5}
      max_wait (seconds) queues instead of refusing: the answer adds
      "delay", the seconds to wait before acting (0: at once), the units
      being held from now; the caller sleeps, the server answers at once.
      Refused when the wait would pass max_wait or limits.max_wait (1m by
      default), which bounds each key's queue to limits.max_wait times the
      policy's rate. Token and leaky buckets queue; under a window or log
      policy delay is 0, and a refusal's retry_after within max_wait says
      when to ask again, nothing being held. One check only, not a batch.
      -> {"allowed":true,"remaining":0,"retry_after":0,"reset_after":3,"delay":2}
  POST /v1/check  {"checks":[{"policy":"per-user","key":"u42"},
                             {"policy":"global","key":"all"}],"mode":"all"}
      mode all (the default): all or nothing, a refusal spends nothing
      anywhere; mode each: each check alone.
      -> {"allowed":false,"retry_after":2.5,"denied":1,"results":[{...},{...}]}
      denied: the index of the check that refused (the one with the longest
      retry_after), absent when allowed; results in the order of checks.
  POST /v1/reset  {"policy":"default","key":"alice"}     -> 204, no body
  GET  /v1/policies
      -> {"policies":[{"name":"default",
          "policy":"token-bucket 100/1m burst=20","algorithm":"token-bucket",
          "limit":100,"period":60,"burst":20}]}
  POST /json      Envoy's rate-limit request in JSON (with --envoy-config)
  GET  /healthcheck
                  envoyproxy/ratelimit's health check: 200 "OK" when the
                  store answers a peek (as /readyz), else 500 with no
                  body; any method, no token

  A refusal is a 200 with "allowed":false. Errors are {"error":"..."}:
  400 for a malformed body (JSON in UTF-8, each field once, in lower
  case), an unknown field or policy, a bad cost (not a whole number,
  negative, above the policy's burst), a bad max_wait (not a number of
  seconds, negative, too large), a missing or too long key, too
  many checks or too big a body; 401 without a valid bearer token
  when the configuration has tokens (Authorization: Bearer TOKEN); 503 with
  Retry-After when the store fails (fail-closed by default).

Operations (on --metrics; keep it private, or set ops.auth and ops.tls):
  GET /metrics    floodgate_decisions_total{policy,result},
                  floodgate_request_duration_seconds{api,endpoint},
                  floodgate_requests_total{api,endpoint,code},
                  floodgate_requests_in_flight{api},
                  floodgate_store_errors_total{policy},
                  floodgate_store_failures_total{store},
                  floodgate_store_fallbacks_total{store,mode},
                  floodgate_store_down{store}, floodgate_memory_keys{store},
                  floodgate_memory_evictions_total{store},
                  floodgate_config_reloads_total{config,result},
                  floodgate_snapshot_writes_total{result} (with --snapshot),
                  floodgate_delayed_total{policy} and
                  floodgate_delay_seconds_total{policy} (max_wait),
                  floodgate_envoy_requests_total{result},
                  floodgate_envoy_from_memory_total,
                  floodgate_deny_cache_{hits,fills,invalidations,...},
                  floodgate_build_info{version,goversion}, Go and process
  GET /healthz    200 while the process runs
  GET /readyz     200 when the store answers a peek, 503 otherwise and
                  while shutting down
  /debug/pprof/   the Go profiler, only with --pprof (never its cmdline,
                  which may hold a secret)

Flags (each also read from the environment variable named after it, such
as FLOODGATE_STORE; a flag given wins):
  --store URL           where the state lives: memory (the default),
                        file:PATH, redis://HOST:PORT[/DB], unix:///PATH,
                        redis-cluster://HOST:PORT[,HOST:PORT...],
                        redis-sentinel://MASTER@HOST:PORT[,...]; instances
                        on one Redis decide together, exactly
  --http ADDR           the JSON API (default 127.0.0.1:8080; port 0 picks
                        a free port)
  --grpc ADDR           Envoy's rate-limit service, served only with
                        --envoy-config (default 127.0.0.1:8081), and gRPC
                        health (grpc.health.v1, no token): "ratelimit" and
                        the service's name SERVING when the store answers a
                        peek (as /readyz), else NOT_SERVING; "" SERVING
                        until shutdown (as /healthz), as upstream's
  --metrics ADDR        metrics, health and pprof (default 127.0.0.1:6070;
                        off for none)
  --pprof               serve the Go profiler on --metrics (default off)
  --config FILE         floodgate's configuration (YAML): policies, limits,
                        auth, TLS, store failure mode, snapshot; see below
  --envoy-config DIR    envoyproxy/ratelimit's configuration directory:
                        serves Envoy's rate-limit service (gRPC, POST /json)
  --envoy-shadow-mode   answer every Envoy request OK, counting what would
                        have been refused
  --envoy-response-headers F
                        rate-limit headers for Envoy to add to the client's
                        response (response_headers_to_add), describing the
                        descriptor envoyproxy/ratelimit's describe (the last
                        over its limit, else the least remaining): none (the
                        default); upstream: RateLimit-Limit, -Remaining and
                        -Reset, as its LIMIT_RESPONSE_HEADERS_ENABLED;
                        x-ratelimit: the same as X-RateLimit-*; ietf:
                        RateLimit-Policy and RateLimit (IETF draft)
  --envoy-quota-mode    put every Envoy descriptor in quota mode, as
                        envoyproxy/ratelimit's QUOTA_MODE: a request is
                        OVER_LIMIT only when all its descriptors are
  --envoy-dynamic-metadata
                        send the dynamic metadata of envoyproxy/ratelimit's
                        RESPONSE_DYNAMIC_METADATA: the request, and the
                        metadata of the rules still within their limit
  --envoy-flush-interval D
                        how often the hits over a fixed window's limit,
                        answered from memory, are written to the store
                        (default 100ms; 0: none is answered from memory,
                        every hit goes to the store); other instances on
                        the store may read them up to D late
  --envoy-table-counters
                        with a Redis store: count Envoy's fixed windows on
                        the store's tables, not on its Redis counters, as
                        floodgate did before the counters were the
                        default; for a rolling upgrade from such a version,
                        whose instances count under other keys
  --max-memory BYTES    the memory store's bound in bytes, all policies
                        together (default: the configuration's, else 256 MiB);
                        the Go runtime's memory limit is set from it (and from
                        --deny-cache) unless GOMEMLIMIT is set
  --deny-cache BYTES    with a Redis or file store: the bound in bytes of the
                        cache of denied keys, which answers requests over
                        their limit without Redis or a transaction, exactly,
                        until anyone writes the key (a file: anything)
                        (default 33554432, 32 MiB; 0 turns it off)
  --snapshot FILE       the memory store's snapshot (default: the
                        configuration's, else serve.snapshot in the state
                        directory: $XDG_STATE_HOME/floodgate, else
                        ~/.local/state/floodgate); off for none. One server
                        per file: it is locked
  --snapshot-interval D how often the snapshot is written besides at
                        shutdown (default 10s; 0 only at shutdown), so a
                        crash loses at most D of decisions
  --shutdown-timeout D  how long requests under way may take to finish
                        at shutdown (default 15s)
  --watch-interval D    how often the configuration files are looked at
                        for changes (default 1s; 0 never: SIGHUP only)
  --log-format F        text (the default) or json, for every line logged
                        (the Redis client's messages too, at warn)
  --log-level L         debug, info (the default), warn or error
  $FLOODGATE_TOKEN      the bearer token, when the configuration names no
                        token file (never logged)

Configuration file (every part optional; relative paths are relative to it):
  policies:                          # none: the built-in "default" alone
    default: token-bucket 100/1m burst=20
    login: sliding-log 5/1m
  limits: {max_body_bytes: 1048576, max_checks: 1000, max_key_bytes: 1024,
           inline_policies: true, max_inline_policies: 100,
           max_wait: 1m}              # the longest delay of a max_wait
  auth: {token_file: token}          # one token a line: rotate by adding
  tls: {cert_file: server.crt, key_file: server.key,
        client_ca_file: clients.crt} # client_ca_file: mutual TLS
  store: {fail_mode: closed, timeout: 100ms, max_keys: 1048576,
          max_bytes: 268435456, threshold: 5, fail_for: 250ms,
          cooldown: 500ms}
                                     # timeout: per call; 1s for file:
                                     # down after threshold failures in a
                                     # row over fail_for (0: any); then a
                                     # probe every cooldown
  snapshot: {file: /var/lib/floodgate/snapshot, interval: 10s}
  ops: {auth: true, tls: true}       # /metrics and pprof want a token of
                                     # auth; --metrics serves with tls's
                                     # certificates (/healthz, /readyz open)
A reload applies policies, limits, auth and certificates; an invalid file
is refused (logged, counted) and the previous configuration keeps serving.
`

// serveEnv names the environment variable of each of serve's flags.
var serveEnv = map[string]string{
	"store": "FLOODGATE_STORE", "http": "FLOODGATE_HTTP", "grpc": "FLOODGATE_GRPC", "metrics": "FLOODGATE_METRICS",
	"config": "FLOODGATE_CONFIG", "envoy-config": "FLOODGATE_ENVOY_CONFIG", "envoy-shadow-mode": "FLOODGATE_ENVOY_SHADOW_MODE",
	"envoy-response-headers": "FLOODGATE_ENVOY_RESPONSE_HEADERS", "envoy-quota-mode": "FLOODGATE_ENVOY_QUOTA_MODE",
	"envoy-dynamic-metadata": "FLOODGATE_ENVOY_DYNAMIC_METADATA", "envoy-flush-interval": "FLOODGATE_ENVOY_FLUSH_INTERVAL",
	"envoy-table-counters": "FLOODGATE_ENVOY_TABLE_COUNTERS",
	"max-memory":           "FLOODGATE_MAX_MEMORY", "deny-cache": "FLOODGATE_DENY_CACHE", "snapshot": "FLOODGATE_SNAPSHOT", "snapshot-interval": "FLOODGATE_SNAPSHOT_INTERVAL",
	"shutdown-timeout": "FLOODGATE_SHUTDOWN_TIMEOUT", "pprof": "FLOODGATE_PPROF", "watch-interval": "FLOODGATE_WATCH_INTERVAL",
	"log-format": "FLOODGATE_LOG_FORMAT", "log-level": "FLOODGATE_LOG_LEVEL",
}

// serveOptions is what serve's flags and their environment variables ask
// for.
type serveOptions struct {
	storeURL        string          // --store
	httpAddr        string          // --http
	grpcAddr        string          // --grpc
	metricsAddr     string          // --metrics; "off" for none
	pprof           bool            // --pprof
	configFile      string          // --config
	envoyDir        string          // --envoy-config
	envoyShadow     bool            // --envoy-shadow-mode
	envoyQuota      bool            // --envoy-quota-mode
	envoyMetadata   bool            // --envoy-dynamic-metadata
	envoyFlushEvery time.Duration   // --envoy-flush-interval; 0 for never
	envoyTables     bool            // --envoy-table-counters
	maxMemory       int64           // --max-memory; 0 for the configuration's
	denyCache       int64           // --deny-cache; 0 for none
	snapshot        string          // --snapshot
	snapshotEvery   time.Duration   // --snapshot-interval
	shutdownTimeout time.Duration   // --shutdown-timeout
	watchEvery      time.Duration   // --watch-interval; 0 for never
	logFormat       string          // --log-format: text or json
	logLevel        string          // --log-level
	set             map[string]bool // the flags given, on the command line or in the environment
	env             map[string]bool // those given in the environment

	level        slog.Level       // --log-level, parsed
	envoyHeaders envoyrls.Headers // --envoy-response-headers
}

// runServe is the serve command.
func runServe(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	o, err := parseServeArgs(args)
	if err != nil {
		return badUsage("serve", serveUsage, err, stdout, stderr)
	}
	log := o.logger(stderr)
	redis.SetLogger(redisstore.Logger(log)) // go-redis's messages too, in the log's format
	so := o.serverOptions(log)
	ctx, stop := shutdownOnSignal(log)
	defer stop()
	reload, stopReload := reloadOnHangup(ctx)
	defer stopReload()
	so.Reload = reload
	so.Listening = printListening(stdout, so.ConfigFile == "")
	if err := server.Run(ctx, so); err != nil {
		if errors.Is(err, server.ErrSnapshotInUse) {
			fmt.Fprintf(stderr, "floodgate serve: %v (is another floodgate serve running? give it --snapshot FILE, or --snapshot off)\n", err)
		} else {
			fmt.Fprintf(stderr, "floodgate serve: %v\n", err)
		}
		if env := o.fromEnv(); env != "" {
			fmt.Fprintf(stderr, "floodgate serve: settings from the environment: %s\n", env)
		}
		return serveExitCode(err)
	}
	return exitOK
}

// serveExitCode is the exit code of err, which stopped serve: exitUsage
// for a store URL or a configuration that cannot be served, as for a bad
// flag; exitFailure for the rest (a listener, a snapshot, a store that
// fails).
func serveExitCode(err error) int {
	if errors.Is(err, storeurl.ErrInvalidURL) || errors.Is(err, server.ErrInvalidConfig) {
		return exitUsage
	}
	return exitFailure
}

// shutdownOnSignal returns a context that ends at the first SIGTERM or
// SIGINT. Later ones are caught too, and only logged, until stop: a
// shutdown under way always finishes with the final snapshot, however many
// signals arrive (GNU timeout sends two, to the process and to its group).
// SIGKILL still stops serve at once.
func shutdownOnSignal(log *slog.Logger) (context.Context, func()) {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		for first := true; ; first = false {
			select {
			case sig := <-sigs:
				if first {
					cancel()
				} else {
					log.Warn("already shutting down: finishing requests under way, then the final snapshot (SIGKILL stops at once)", "signal", sig.String())
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}

// parseServeArgs parses serve's flags, sets those not given from their
// environment variables (serveEnv), and validates them.
func parseServeArgs(args []string) (*serveOptions, error) {
	o := &serveOptions{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed by runServe
	fs.StringVar(&o.storeURL, "store", "memory", "")
	fs.StringVar(&o.httpAddr, "http", server.DefaultHTTPAddr, "")
	fs.StringVar(&o.grpcAddr, "grpc", server.DefaultGRPCAddr, "")
	fs.StringVar(&o.metricsAddr, "metrics", server.DefaultMetricsAddr, "")
	fs.BoolVar(&o.pprof, "pprof", false, "")
	fs.StringVar(&o.configFile, "config", "", "")
	fs.StringVar(&o.envoyDir, "envoy-config", "", "")
	fs.BoolVar(&o.envoyShadow, "envoy-shadow-mode", false, "")
	fs.BoolVar(&o.envoyQuota, "envoy-quota-mode", false, "")
	fs.BoolVar(&o.envoyMetadata, "envoy-dynamic-metadata", false, "")
	fs.DurationVar(&o.envoyFlushEvery, "envoy-flush-interval", envoyrls.DefaultFlushInterval, "")
	fs.BoolVar(&o.envoyTables, "envoy-table-counters", false, "")
	fs.TextVar(&o.envoyHeaders, "envoy-response-headers", envoyrls.NoHeaders, "")
	fs.Int64Var(&o.maxMemory, "max-memory", 0, "")
	fs.Int64Var(&o.denyCache, "deny-cache", server.DefaultDenyCacheBytes, "")
	fs.StringVar(&o.snapshot, "snapshot", "", "")
	fs.DurationVar(&o.snapshotEvery, "snapshot-interval", server.DefaultSnapshotInterval, "")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", server.DefaultShutdownTimeout, "")
	fs.DurationVar(&o.watchEvery, "watch-interval", server.DefaultWatchInterval, "")
	fs.StringVar(&o.logFormat, "log-format", "text", "")
	fs.StringVar(&o.logLevel, "log-level", "info", "")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if o.set, o.env, err = setFromEnv(fs, serveEnv); err != nil {
		return nil, err
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// fromEnv lists the settings taken from the environment, as NAME=VALUE
// (a store's password hidden), for an error that one of them may have
// caused; "" when none was.
func (o *serveOptions) fromEnv() string {
	var out []string
	for name, variable := range serveEnv {
		if value := os.Getenv(variable); value != "" && o.env[name] {
			if name == "store" {
				value = storeurl.Redact(value)
			}
			out = append(out, variable+"="+value)
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// setFromEnv sets each flag of fs that was not given from its environment
// variable in env, when that is set, and returns the flags given either
// way.
func setFromEnv(fs *flag.FlagSet, env map[string]string) (set, fromEnv map[string]bool, err error) {
	set, fromEnv = givenFlags(fs), map[string]bool{}
	for name, variable := range env {
		if value := os.Getenv(variable); value != "" && !set[name] {
			if err := fs.Set(name, value); err != nil {
				return nil, nil, fmt.Errorf("$%s: %v", variable, err)
			}
			set[name], fromEnv[name] = true, true
		}
	}
	return set, fromEnv, nil
}

// validate checks the durations and the log's flags, and parses the log
// level.
func (o *serveOptions) validate() error {
	for name, d := range map[string]time.Duration{"snapshot-interval": o.snapshotEvery, "shutdown-timeout": o.shutdownTimeout, "watch-interval": o.watchEvery,
		"envoy-flush-interval": o.envoyFlushEvery} {
		if d < 0 {
			return fmt.Errorf("--%s %v: a duration cannot be negative", name, d)
		}
	}
	if o.maxMemory < 0 {
		return fmt.Errorf("--max-memory %d: a number of bytes cannot be negative", o.maxMemory)
	}
	if o.denyCache < 0 {
		return fmt.Errorf("--deny-cache %d: a number of bytes cannot be negative", o.denyCache)
	}
	if err := o.level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", o.logFormat)
	}
	return nil
}

// logger returns the log on w, in the format and from the level of the
// flags. Durations are written as Go writes them, 15s, in JSON too
// (where slog writes integer nanoseconds).
func (o *serveOptions) logger(w io.Writer) *slog.Logger {
	hopts := &slog.HandlerOptions{Level: o.level, ReplaceAttr: readableDuration}
	if o.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, hopts))
	}
	return slog.New(slog.NewTextHandler(w, hopts))
}

// readableDuration is a slog.HandlerOptions.ReplaceAttr that writes a
// duration as its String, 15s.
func readableDuration(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// serverOptions returns the server's options of the flags, logging on
// log. The default snapshot is serve.snapshot in the state directory.
func (o *serveOptions) serverOptions(log *slog.Logger) server.Options {
	so := server.Options{
		Store: o.storeURL, HTTPAddr: o.httpAddr, GRPCAddr: o.grpcAddr, MetricsAddr: o.metricsAddr, Pprof: o.pprof,
		ConfigFile: o.configFile, EnvoyConfigDir: o.envoyDir, EnvoyShadowMode: o.envoyShadow, EnvoyResponseHeaders: o.envoyHeaders,
		EnvoyQuotaMode: o.envoyQuota, EnvoyDynamicMetadata: o.envoyMetadata, EnvoyTableCounters: o.envoyTables,
		MaxMemoryBytes: o.maxMemory, SetMemoryLimit: true, SnapshotFile: o.snapshot, ShutdownTimeout: o.shutdownTimeout,
		Token: os.Getenv("FLOODGATE_TOKEN"), Logger: log,
	}
	if so.MetricsAddr == "off" {
		so.MetricsAddr = ""
	}
	so.DenyCacheBytes = o.denyCache
	if o.denyCache == 0 {
		so.DenyCacheBytes = -1 // off
	}
	if o.set["snapshot-interval"] {
		so.SnapshotInterval = &o.snapshotEvery
	}
	so.WatchInterval = o.watchEvery
	if o.watchEvery == 0 {
		so.WatchInterval = -1 // never
	}
	so.EnvoyFlushInterval = o.envoyFlushEvery
	if o.envoyFlushEvery == 0 {
		so.EnvoyFlushInterval = -1 // every hit to the store
	}
	if dir, err := stateDir(); err == nil {
		so.DefaultSnapshotFile = filepath.Join(dir, "serve.snapshot")
	} else {
		log.Warn("no state directory for the default snapshot", "err", err)
	}
	return so
}

// reloadOnHangup returns a channel that receives a value for each SIGHUP
// until ctx is done, and a function that stops listening for SIGHUP.
func reloadOnHangup(ctx context.Context) (<-chan struct{}, func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reload := make(chan struct{})
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return reload, func() { signal.Stop(hup) }
}

// printListening returns the server's Listening function: it prints a line
// on stdout for each address, then the ready line, which with try gives a
// curl command for the built-in policy. Its lines are never interleaved.
func printListening(stdout io.Writer, try bool) func(name string, addr net.Addr) {
	var mu sync.Mutex
	return func(name string, addr net.Addr) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case name == "ready" && try:
			fmt.Fprintf(stdout, "floodgate serve: ready; try: curl -s -d '{\"policy\":\"default\",\"key\":\"alice\"}' %s\n", tryURL(addr))
			return
		case name == "ready":
			fmt.Fprintln(stdout, "floodgate serve: ready")
			return
		case name == "unready":
			fmt.Fprintln(stdout, "floodgate serve: serving, but the store does not answer: store.fail_mode decides until it does (/readyz on --metrics tells)")
			return
		}
		fmt.Fprintf(stdout, "floodgate serve: %s %s\n", name, addr)
	}
}

// tryURL is the URL of the check endpoint at the HTTP API's address, for
// the ready line's example.
func tryURL(addr net.Addr) string {
	host := "127.0.0.1"
	if ta, ok := addr.(*net.TCPAddr); ok && !ta.IP.IsUnspecified() {
		host = ta.IP.String()
	}
	port := "8080"
	if ta, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(ta.Port)
	}
	return "http://" + net.JoinHostPort(host, port) + "/v1/check"
}
