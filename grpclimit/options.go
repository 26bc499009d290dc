package grpclimit

import (
	"context"
	"log/slog"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/internal/frontend"
)

// An Option configures an Interceptor.
type Option interface{ apply(*config) }

type config struct {
	frontend.Config[*call]
	methods      []string
	quotaFailure bool
}

func defaults() config {
	var c config
	c.Key, c.N = ByPeer(httplimit.ClientIP{}).of(), 1
	return c
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// A CostFunc returns the cost of a call: req is a unary call's request
// message, nil for a stream (which is decided once, when it opens).
type CostFunc func(ctx context.Context, fullMethod string, req any) int64

// of is f as the front-end core calls it; nil for a nil f.
func (f CostFunc) of() func(*call) int64 {
	if f == nil {
		return nil
	}
	return func(c *call) int64 { return f(c.ctx, c.method, c.req) }
}

// WithKey keys calls with f instead of the peer's address
// (ByPeer(httplimit.ClientIP{})). With NewAll, it is the key of the limits
// that have none of their own.
func WithKey(f KeyFunc) Option { return optionFunc(func(c *config) { c.Key = f.of() }) }

// WithCost makes every call cost n units instead of 1. With NewAll, it is
// the cost of the limits that have no Cost of their own.
func WithCost(n int64) Option {
	return optionFunc(func(c *config) { c.N, c.Cost = n, nil })
}

// WithName names the limit in QuotaFailure details and logs (for New;
// NewAll takes Limit.Name). By default the name is the limiter's name
// (floodgate.WithName), or "default" if it has none.
func WithName(name string) Option { return optionFunc(func(c *config) { c.Name = name }) }

// WithCostFunc makes each call cost f's units instead of 1. A cost above
// the policy's burst can never be admitted: it fails with
// codes.InvalidArgument, without RetryInfo; a negative cost is
// codes.Internal. With NewAll, it is the
// cost of the limits that have no Cost of their own.
func WithCostFunc(f CostFunc) Option { return optionFunc(func(c *config) { c.Cost = f.of() }) }

// WithMethods limits only the calls to the given methods: full method
// names ("/pkg.Service/Method"), or services ending in a slash
// ("/pkg.Service/") for every method of the service. Other calls pass
// untouched. For New; NewAll takes Limit.Methods.
func WithMethods(methods ...string) Option {
	return optionFunc(func(c *config) { c.methods = append([]string(nil), methods...) })
}

// WithSkip lets through, unlimited, every call for which f returns true.
// Several WithSkip options add up.
func WithSkip(f func(ctx context.Context, fullMethod string) bool) Option {
	return optionFunc(func(c *config) {
		c.Skips = append(c.Skips, func(c *call) bool { return f(c.ctx, c.method) })
	})
}

// WithQuotaFailure adds an errdetails.QuotaFailure to the status of a
// denial, with one violation per limit that denied, besides its
// errdetails.RetryInfo.
func WithQuotaFailure() Option { return optionFunc(func(c *config) { c.quotaFailure = true }) }

// WithOnLimited calls f on every denial, with the decision of the limit
// that denied, and on every call that a limiter in dry-run mode would have
// denied (d.DryRun set), which goes through.
func WithOnLimited(f func(ctx context.Context, fullMethod string, d floodgate.Decision)) Option {
	return optionFunc(func(c *config) {
		c.OnLimited = func(c *call, d floodgate.Decision) { f(c.ctx, c.method, d) }
	})
}

// WithLogger logs to l instead of slog.Default(): limiter and key-function
// errors at level Error, at most one line a second, and each call a
// dry-run limiter would have denied at level Info.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(c *config) { c.Log = l }) }

// WithDelay shapes instead of refusing, as httplimit.WithDelay does: a
// call over the rate waits its exact turn (floodgate.Limiter.Delay),
// first come first served, and fails with codes.ResourceExhausted only
// if its turn is more than maxWait away, past the call's deadline, or the
// key already has the limiter's maximum of waiting calls (by default,
// with a window or log policy, the calls the policy admits within
// maxWait; floodgate.WithMaxQueue sets another); its RetryInfo then says when a retry would be
// admitted within maxWait. A call cancelled while it waits gives its
// units back if no call has queued behind it. The nginx equivalents are in package httplimit's doc
// ("Shaping"). maxWait 0 (the default) refuses at once. For New only:
// NewAll panics with it, since waiting cannot yet be all or nothing.
func WithDelay(maxWait time.Duration) Option {
	return optionFunc(func(c *config) { c.MaxWait = max(maxWait, 0) })
}
