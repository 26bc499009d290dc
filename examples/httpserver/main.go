// Command httpserver is a small web server rate-limited by floodgate's
// httplimit middleware, to try it with curl:
//
//	go run ./examples/httpserver
//
// It prints the curl commands to try. Its routes:
//
//	/          5 requests per 10 seconds per client address
//	/api/      per user (X-Demo-User) or else per address, plus a global limit
//	/upload    1 MB a minute per client, the request's size being its cost
//	/stream    a streamed response, flushed line by line through the middleware (3 at once, 1 a second)
//	/healthz   never limited
//
// Flags: -addr to listen elsewhere, -policy for /'s policy, -trust for the
// CIDRs of reverse proxies whose X-Forwarded-For to believe.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/httplimit"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "httpserver:", err)
		os.Exit(1)
	}
}

// config is what the flags set.
type config struct {
	policy  algo.Policy
	trusted []netip.Prefix
	opts    []floodgate.Option // for tests: a fake clock
}

// run serves until ctx is done, printing what to try on out.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("httpserver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on")
	policy := fs.String("policy", "token-bucket 5/10s", "policy of / per client address")
	trust := fs.String("trust", "", "comma-separated CIDRs of trusted reverse proxies, such as 10.0.0.0/8")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var cfg config
	var err error
	if cfg.policy, err = algo.ParsePolicy(*policy); err != nil {
		return err
	}
	for _, s := range strings.Split(*trust, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("-trust: %w", err)
		}
		cfg.trusted = append(cfg.trusted, p)
	}

	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newHandler(cfg), ReadHeaderTimeout: 10 * time.Second}
	printHelp(out, "http://"+lis.Addr().String(), cfg)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type userKey struct{}

// newHandler returns the server's routes, each with its limits.
func newHandler(cfg config) http.Handler {
	ip := httplimit.ClientIP{TrustedProxies: cfg.trusted}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	common := []httplimit.Option{httplimit.WithKey(ip.Key), httplimit.WithLogger(log),
		httplimit.WithHeaders(httplimit.RateLimitHeaders | httplimit.LegacyHeaders)}
	limiter := func(p algo.Policy, name string) *floodgate.Limiter {
		return floodgate.Must(floodgate.NewLimiter(p, append([]floodgate.Option{floodgate.WithName(name)}, cfg.opts...)...))
	}
	mux := http.NewServeMux()

	// /: per client address.
	perAddr := httplimit.New(limiter(cfg.policy, "per-address"), common...)
	mux.Handle("GET /{$}", perAddr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := httplimit.DecisionFrom(r.Context())
		fmt.Fprintf(w, "hello; %d left\n", d.Remaining)
	})))

	// /api/: per signed-in user, or per address; and 100 a minute in all.
	api := httplimit.NewAll([]httplimit.Limit{
		{Limiter: limiter(algo.MustParsePolicy("sliding-log 3/30s"), "per-user"),
			Key: httplimit.FirstOf(httplimit.ByContext(userKey{}), ip.Key)},
		{Limiter: limiter(algo.MustParsePolicy("fixed-window 100/1m"), "global"), Key: httplimit.Global},
	}, common...)
	mux.Handle("/api/", demoAuth(api.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, _ := r.Context().Value(userKey{}).(string)
		fmt.Fprintf(w, "api for %q\n", user)
	}))))

	// /upload: its size in bytes is its cost.
	// BodyBytes counts a chunked body too, reading up to the burst ahead.
	uploadPolicy := algo.MustParsePolicy("token-bucket 1000000/1m")
	upload := httplimit.New(limiter(uploadPolicy, "upload-bytes"),
		append(common, httplimit.WithQuotaUnit("content-bytes"),
			httplimit.WithCostFunc(httplimit.BodyBytes(uploadPolicy.Burst())))...)
	mux.Handle("POST /upload", upload.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "received %d bytes\n", n)
	})))

	// /stream: flushed line by line through the middleware.
	streams := httplimit.New(limiter(algo.MustParsePolicy("token-bucket 1/1s burst=3"), "streams"), common...)
	mux.Handle("GET /stream", streams.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for i := range 3 {
			fmt.Fprintf(w, "line %d\n", i)
			if err := rc.Flush(); err != nil {
				return
			}
		}
	})))

	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	return mux
}

// demoAuth stands for real authentication: it takes the user from the
// X-Demo-User header, which a real server would never believe.
func demoAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u := r.Header.Get("X-Demo-User"); u != "" {
			r = r.WithContext(context.WithValue(r.Context(), userKey{}, u))
		}
		next.ServeHTTP(w, r)
	})
}

func printHelp(out io.Writer, base string, cfg config) {
	trust := "none: X-Forwarded-For is ignored (try -trust 127.0.0.0/8)"
	if len(cfg.trusted) > 0 {
		trust = fmt.Sprint(cfg.trusted)
	}
	fmt.Fprintf(out, `listening on %[1]s
  /        %[2]s per client address
  trusted proxies: %[3]s

Try:
  curl -i %[1]s/
  for i in $(seq 8); do curl -s -o /dev/null -w '%%{http_code} ' %[1]s/; done; echo
  curl -i -H 'Accept: application/json' %[1]s/          # the 429 as application/problem+json
  curl -i -H 'X-Forwarded-For: 203.0.113.9' %[1]s/      # believed only with -trust
  for i in $(seq 4); do curl -s -H 'X-Demo-User: alice' %[1]s/api/; done
  curl -s -H 'X-Demo-User: bob' %[1]s/api/
  head -c 600000 /dev/zero | curl -s --data-binary @- %[1]s/upload   # twice: the second is refused
  curl -N %[1]s/stream
  curl %[1]s/healthz                                  # never limited
Ctrl-C stops the server.
`, base, cfg.policy, trust)
}
