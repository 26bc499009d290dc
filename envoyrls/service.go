package envoyrls

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/logthrottle"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
)

// MaxDescriptors is the most descriptors a request may carry; a request
// with more is refused with codes.InvalidArgument. Envoy sends one per
// rate limit action of a route, a handful.
const MaxDescriptors = 1024

// Service is the Envoy rate limit service (envoy.service.ratelimit.v3,
// method ShouldRateLimit) over a floodgate Store, configured by a Config.
// Register it on a gRPC server with rlsv3.RegisterRateLimitServiceServer,
// and mount JSONHandler on an HTTP server for envoyproxy/ratelimit's POST
// /json.
//
// Its methods are safe for concurrent use. SetConfig swaps the
// configuration atomically: a request is decided wholly under the
// configuration it started with, and the limits of rules that did not
// change keep their state. Close writes the hits it answered from memory
// (see "Hits over the limit" in the package documentation) and stops the
// goroutine that writes them. There is no zero value: use NewService.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	store store.Store
	opts  options
	cur   atomic.Pointer[bound]

	omu       sync.Mutex
	overrides map[counterKey]store.Counters // the counters of the limits requests carry

	ok, over, shadow, unknown, errs atomic.Uint64

	errLogs logthrottle.Throttle // one store failure line a second

	local overCounts // the counters known over, and the hits owed to them
}

// bound is a Config with the limiters of its rules.
type bound struct {
	cfg      *Config   // never nil
	given    bool      // cfg was given, not made for nil
	limiters []limiter // by rule id
}

// A limiter is a rule's floodgate.Limiter, or for a fixed window its
// counters, or the error that the store refused its table with.
type limiter struct {
	l   *floodgate.Limiter
	c   store.Counters
	err error
}

// A counterKey names the counters of a domain's fixed windows of one
// length.
type counterKey struct {
	domain string
	period time.Duration
}

// maxOverrides bounds the limiters remembered for the limits that requests
// carry (RateLimitDescriptor.limit); past it, one is made for each request.
const maxOverrides = 1024

// NewService returns a service deciding with cfg (nil: no domain, every
// request answered OK) and keeping its counters in store (nil: a new
// memstore.New(0)). Each domain's limits live in the store
// tables named "envoyrls/", the domain and its rules (see the package doc),
// so that services sharing a store (several processes on one Redis) share
// their limits.
func NewService(cfg *Config, st store.Store, opts ...Option) *Service {
	o := defaults()
	for _, opt := range opts {
		opt.apply(&o)
	}
	if _, real := o.clock.(clock.Real); real {
		o.clock = nil
	}
	if st == nil {
		st = memstore.New(0)
	}
	s := &Service{store: st, opts: o, overrides: make(map[counterKey]store.Counters), local: newOverCounts(o.flushEvery)}
	s.cur.Store(s.bind(cfg))
	return s
}

// SetConfig replaces the configuration, atomically: requests under way
// finish under the old one, later ones see the new one. A limit whose rule
// is unchanged (same domain, same algorithm, requests_per_unit, unit and
// burst) keeps its state, since it uses the same store table, and so does
// a fixed window whose requests_per_unit alone changed (the count is the
// descriptor's, as upstream's); a rule of the same descriptors whose
// policy otherwise changed keeps its keys' spent units, converted by the
// store (algo.Policy.Convert), and everything starts afresh when the
// store is not shared.
// nil means no domain.
//
// SetConfig cannot fail: cfg was checked when parsed. A rule whose table
// the store refuses (a store may refuse names it cannot hold) is logged,
// and requests that match it fail with codes.Unavailable.
func (s *Service) SetConfig(cfg *Config) {
	b := s.bind(cfg)
	s.cur.Store(b)
	s.opts.log.Info("envoyrls: configuration set", "domains", len(b.cfg.domains), "rules", len(b.cfg.rules))
}

// bind makes the limiter of each of cfg's rules that has one: a fixed
// window's is its domain's counter for the window's length, shared.
func (s *Service) bind(cfg *Config) *bound {
	given := cfg != nil
	if cfg == nil {
		cfg = &Config{}
	}
	b := &bound{cfg: cfg, given: given, limiters: make([]limiter, len(cfg.rules))}
	for _, w := range cfg.warnings {
		s.opts.log.Warn("envoyrls: configuration: " + w)
	}
	counters := make(map[counterKey]limiter)
	for _, r := range cfg.rules {
		if r.unlimited || !r.onStore() {
			continue
		}
		l := s.ruleLimiter(r, counters)
		if l.err != nil {
			l.err = fmt.Errorf("envoyrls: rule %s (%s:%d): %w", r.path, r.file, r.line, l.err)
			s.opts.log.Error("envoyrls: the store refused a rule's table", "err", l.err)
		}
		b.limiters[r.id] = l
	}
	return b
}

// ruleLimiter returns r's limiter: for a fixed window, its domain's
// counter for the window's length, taken from counters or made and
// added to them.
func (s *Service) ruleLimiter(r *rule, counters map[counterKey]limiter) limiter {
	if !r.upstream {
		l, err := s.newLimiter(ruleName(r), r.policy, r.shadow)
		return limiter{l: l, err: err}
	}
	k := counterKey{r.domain, r.period}
	l, ok := counters[k]
	if !ok {
		c, err := s.newCounter(r.domain, r.period)
		l = limiter{c: c, err: err}
		counters[k] = l
	}
	return l
}

// newCounter returns the domain's counters of the fixed windows of length
// period (store.CountersOf): they count every hit, and shadow mode acts
// on the answer.
func (s *Service) newCounter(domainName string, period time.Duration) (store.Counters, error) {
	return store.CountersOf(s.store, tableName(domainName), period)
}

// newLimiter returns the limiter named name of a limit with policy p, on
// the service's store; shadow mode (the rule's, or the whole service's)
// is the limiter's dry run.
func (s *Service) newLimiter(name string, p algo.Policy, shadow bool) (*floodgate.Limiter, error) {
	return floodgate.NewLimiter(p, floodgate.WithStore(s.store), floodgate.WithName(name),
		floodgate.WithDryRun(shadow || s.opts.shadow))
}

// tableName is the name of a domain's counters (newCounter).
func tableName(domain string) string { return "envoyrls/" + domain }

// ruleName is the name of the limiter of r, a rule of floodgate's
// algorithms: "envoyrls/", its domain with '%' and '/' escaped as in
// URLs, "/", then its descriptors as its statistics name them (r.path
// after the domain). A rule keeps its name when its policy changes, and
// the store converts its keys' spent units to the new policy; the
// domain's other rules have names of their own, not former policies of
// it.
func ruleName(r *rule) string {
	return "envoyrls/" + domainEscaper.Replace(r.domain) + "/" + strings.TrimPrefix(r.path, r.domain+".")
}

var domainEscaper = strings.NewReplacer("%", "%25", "/", "%2F")

// Outcome is what WithObserver reports for one descriptor of a request.
type Outcome struct {
	Domain string
	// Rule names the rule as upstream names it in its statistics: the
	// domain, then each descriptor's key, and _value when it has one,
	// joined by dots, such as "edge.remote_address" or
	// "api.tenant_acme.path_/upload/*"; the domain followed by
	// " (override)" for a limit the request carried.
	Rule   string
	Name   string      // the rule's name, if it has one
	Policy algo.Policy // the zero Policy for requests_per_unit 0
	Hits   int64       // the descriptor's cost
	// Over reports whether the descriptor was over its limit; Code is
	// the status's code, OK for an Over descriptor in shadow mode.
	Over bool
	Code rlsv3.RateLimitResponse_Code
}

// Config returns the configuration in use: the one given to NewService or
// to the last SetConfig, nil if that was nil.
func (s *Service) Config() *Config {
	if b := s.cur.Load(); b.given {
		return b.cfg
	}
	return nil
}

// Stats counts the requests a Service answered, by result, since it was
// made. Every request is counted once in OK, OverLimit or Errors; Shadow
// and UnknownDomain count some of the OK ones again.
type Stats struct {
	OK        uint64 // requests answered with overall code OK
	OverLimit uint64 // requests answered with overall code OVER_LIMIT
	// Shadow counts the requests answered OK that would have been
	// OVER_LIMIT without shadow mode (a rule's shadow_mode, or
	// WithShadowMode): those with a descriptor over its limit in
	// shadow mode.
	Shadow uint64
	// UnknownDomain counts the requests for a domain the configuration
	// does not have, answered OK with no limit.
	UnknownDomain uint64
	// Errors counts the requests answered with an error: bad input
	// (codes.InvalidArgument) or a failing store (codes.Unavailable),
	// and the bodies JSONHandler refused before asking.
	Errors uint64
	// FromMemory counts the descriptors answered without the store:
	// hits on fixed-window counters known to be over their limit in the
	// window (see the package documentation, "Hits over the limit").
	FromMemory uint64
}

// Stats returns the service's counts.
func (s *Service) Stats() Stats {
	return Stats{OK: s.ok.Load(), OverLimit: s.over.Load(), Shadow: s.shadow.Load(),
		UnknownDomain: s.unknown.Load(), Errors: s.errs.Load(), FromMemory: s.local.answered.Load()}
}

func (s *Service) now() int64 {
	if s.opts.clock == nil {
		return clock.UnixNano()
	}
	return s.opts.clock.Now().UnixNano()
}

// logStoreError logs a store failure, at most once a second: a store
// that is down fails every request.
func (s *Service) logStoreError(domainName, rulePath string, err error) {
	unlogged, ok := s.errLogs.Allow()
	if !ok {
		return
	}
	s.opts.log.Error("envoyrls: store failure", "domain", domainName, "rule", rulePath, "err", err,
		"failures_not_logged", unlogged)
}
