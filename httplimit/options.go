package httplimit

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/frontend"
)

// An Option configures a Middleware.
type Option interface{ apply(*config) }

type config struct {
	frontend.Config[*http.Request]
	unit     string
	status   int
	body     []byte
	bodyType string
	denied   http.Handler
	onError  func(http.ResponseWriter, *http.Request, error)
	headers  Headers
}

// defaults returns the configuration before any option.
func defaults() config {
	c := config{status: http.StatusTooManyRequests, headers: RateLimitHeaders}
	c.Key, c.N = ClientIP{}.Key, 1
	return c
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithKey keys requests with f instead of their client address
// (ClientIP{}.Key, which believes no proxy header). With NewAll, it is the
// key of the limits that have none of their own.
func WithKey(f KeyFunc) Option { return optionFunc(func(c *config) { c.Key = f }) }

// WithCost makes every request cost n units instead of 1. With NewAll, it
// is the cost of the limits that have no Cost of their own.
func WithCost(n int64) Option {
	return optionFunc(func(c *config) { c.N, c.Cost = n, nil })
}

// WithCostFunc makes each request cost f(r) units instead of 1: the bytes
// of its body (BodyBytes, which counts a chunked body too), the computed
// cost of a GraphQL query, and so on. A cost
// above the policy's burst can never be admitted: it is answered 413
// Content Too Large, without Retry-After; a negative cost is a server
// error (500). f runs before the
// next handler, so one that reads the body must put it back (see the
// example). With NewAll, it is the cost of the limits that have no Cost of
// their own.
func WithCostFunc(f func(*http.Request) int64) Option {
	return optionFunc(func(c *config) { c.Cost = f })
}

// WithName names the limit in the header fields and in problem details
// (for New; NewAll takes Limit.Name). By default the name is the
// limiter's name (floodgate.WithName), or "default" if it has none.
func WithName(name string) Option { return optionFunc(func(c *config) { c.Name = name }) }

// WithQuotaUnit sets the quota unit advertised in RateLimit-Policy (its qu
// parameter): "requests" (the default, not written), "content-bytes", or
// "concurrent-requests". With NewAll, it is the unit of the limits that
// have no Unit of their own.
func WithQuotaUnit(unit string) Option { return optionFunc(func(c *config) { c.unit = unit }) }

// WithSkip lets through, unlimited and without rate-limit header fields,
// every request for which f returns true: health checks, your own
// monitoring (see ClientIP.In), internal callers. Several WithSkip options
// add up: a request is skipped if any says so.
func WithSkip(f func(*http.Request) bool) Option {
	return optionFunc(func(c *config) { c.Skips = append(c.Skips, f) })
}

// WithStatus sets the status of a denial, 429 Too Many Requests by
// default; some prefer 503 Service Unavailable.
func WithStatus(code int) Option { return optionFunc(func(c *config) { c.status = code }) }

// WithDeniedBody makes every denial answer body with the given
// Content-Type, instead of a problem detail or a line of text chosen by the
// Accept header.
func WithDeniedBody(contentType string, body []byte) Option {
	body = append([]byte{}, body...)
	return optionFunc(func(c *config) { c.bodyType, c.body = contentType, body })
}

// WithDeniedHandler answers denials with h instead of the default body. h
// runs after the header fields (RateLimit, Retry-After) are set, and
// DecisionFrom(r.Context()) returns the decision; it writes the status
// itself.
func WithDeniedHandler(h http.Handler) Option { return optionFunc(func(c *config) { c.denied = h }) }

// WithOnLimited calls f on every denial, before the response is written,
// with the decision of the limit that denied, and on every request that a
// limiter in dry-run mode would have denied (d.DryRun set), which is
// served: for metrics and logs. f must not write to the response.
func WithOnLimited(f func(r *http.Request, d floodgate.Decision)) Option {
	return optionFunc(func(c *config) { c.OnLimited = f })
}

// WithErrorHandler answers the requests that the middleware cannot decide
// with f instead of the default response (see Middleware): those whose key
// function failed and those whose limiter failed. The error may wrap
// ErrNoKey, failsafe.ErrUnavailable and so on. f writes the response.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return optionFunc(func(c *config) { c.onError = f })
}

// WithLogger logs to l instead of slog.Default(). The middleware logs
// limiter and key-function errors at level Error, at most one line a
// second (with the number of errors not logged since the last line), and
// each request a dry-run limiter would have denied at level Info.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.Log = l }) }

// WithHeaders selects the rate-limit header fields written,
// RateLimitHeaders by default: RateLimitHeaders|LegacyHeaders adds the
// X-RateLimit ones, NoHeaders writes none (but Retry-After on denials).
func WithHeaders(h Headers) Option { return optionFunc(func(c *config) { c.headers = h }) }

// WithDelay shapes instead of refusing: a request over the rate waits its
// exact turn (floodgate.Limiter.Delay), first come first served, and is
// refused only if its turn is more than maxWait away or the key already
// has the limiter's maximum of waiting requests: by default, with a window
// or log policy, the requests the policy admits within maxWait
// (floodgate.Limiter.Delay; floodgate.WithMaxQueue sets another).
// With a bucket policy of capacity D+1 this is nginx's limit_req with
// delay=D: see "Shaping" in the package doc for the equivalents. A client
// that disconnects while it waits gives its units back if no request has
// queued behind it (floodgate.Reservation.Cancel). maxWait 0 (the
// default) refuses at once, as without the option. For New only: NewAll
// panics with it, since waiting cannot yet be all or nothing.
func WithDelay(maxWait time.Duration) Option {
	return optionFunc(func(c *config) { c.MaxWait = max(maxWait, 0) })
}
