package envoyrls

import (
	"context"
	"log/slog"
	"time"

	"github.com/floodgate/floodgate/clock"
)

// An Option configures a Service.
type Option interface{ apply(*options) }

type options struct {
	clock    clock.Clock // nil: the real clock
	log      *slog.Logger
	shadow   bool
	quota    bool
	headers  Headers
	observer func(context.Context, Outcome)
	// dynamicMetadata: see WithDynamicMetadata
	dynamicMetadata bool
	flushEvery      time.Duration // see WithFlushInterval
}

// defaults returns the configuration before any option.
func defaults() options {
	return options{log: slog.New(slog.DiscardHandler), flushEvery: DefaultFlushInterval}
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithClock reads the time from c instead of the system clock: tests pass
// a clock.Fake. The service reads it once per request, so that all the
// descriptors of a request are decided at the same instant.
func WithClock(c clock.Clock) Option { return optionFunc(func(o *options) { o.clock = c }) }

// WithLogger logs to l: store failures at level Error, rules whose table
// the store refused at Error when the configuration is set, the
// configuration's Warnings at Warn, and configuration changes at Info.
// By default the service logs nothing.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) {
		if l != nil {
			o.log = l
		}
	})
}

// WithShadowMode puts the whole service in shadow mode, like
// envoyproxy/ratelimit's SHADOW_MODE setting: every request is decided and
// counted as usual, and each descriptor's status tells the truth, but the
// overall code is always OK. Stats counts the requests it let through.
func WithShadowMode(on bool) Option { return optionFunc(func(o *options) { o.shadow = on }) }

// WithObserver calls f with the outcome of every descriptor decided
// against a limit (not those with no rule, an unlimited one or a replaced
// one), for metrics by rule and result. f runs on the request's
// goroutine, before the answer is sent: it must be quick and safe for
// concurrent use.
func WithObserver(f func(context.Context, Outcome)) Option {
	return optionFunc(func(o *options) { o.observer = f })
}

// WithResponseHeaders has the service ask Envoy to add rate-limit header
// fields of form h to the responses to clients, as envoyproxy/ratelimit's
// LIMIT_RESPONSE_HEADERS_ENABLED does (see Headers for the fields and the
// descriptor they describe). The default is NoHeaders.
func WithResponseHeaders(h Headers) Option { return optionFunc(func(o *options) { o.headers = h }) }

// WithQuotaMode puts every descriptor in quota mode, like
// envoyproxy/ratelimit's QUOTA_MODE setting and as quota_mode does for
// one rule: a descriptor over its limit is still answered OVER_LIMIT,
// but the overall code is OVER_LIMIT only when every descriptor is.
func WithQuotaMode(on bool) Option { return optionFunc(func(o *options) { o.quota = on }) }

// WithDynamicMetadata makes every answer carry dynamic metadata, like
// envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA setting: the request's
// domain, its descriptors (entries written key=value, limit, hitsAddend)
// and hitsAddend, and under "metadata" the metadata of the rules of the
// descriptors that were not over their limit, merged in the request's
// order. Envoy can route on it, with quota_mode, to a service that has
// quota left.
func WithDynamicMetadata(on bool) Option {
	return optionFunc(func(o *options) { o.dynamicMetadata = on })
}

// WithFlushInterval sets how often the service writes to its store the
// hits it answered from memory, DefaultFlushInterval by default: the
// hits on a fixed window's counter known to be over their rule's limit
// (see "Hits over the limit" in the package documentation). A negative d
// answers nothing from memory: every hit is a store call, as before
// there was a choice. 0 means the default.
func WithFlushInterval(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d != 0 {
			o.flushEvery = d
		}
	})
}
