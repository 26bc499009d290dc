package envoyrls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/memstore"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/logthrottle"
	"github.com/floodgate/floodgate/internal/seconds"
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
// change keep their state. There is no zero value: use NewService.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	store store.Store
	opts  options
	cur   atomic.Pointer[bound]

	omu       sync.Mutex
	overrides map[overrideKey]tableOrErr // tables of the limits requests carry

	ok, over, shadow, unknown, errs atomic.Uint64

	errLogs logthrottle.Throttle // one store failure line a second
}

// bound is a Config with the store tables of its rules.
type bound struct {
	cfg    *Config      // never nil
	given  bool         // cfg was given, not made for nil
	tables []tableOrErr // by rule id
}

type overrideKey struct {
	domain string
	policy algo.Policy
}

type tableOrErr struct {
	t   store.Table
	err error
}

// maxOverrides bounds the tables remembered for the limits that requests
// carry (RateLimitDescriptor.limit); past it, the store is asked each time.
const maxOverrides = 1024

// NewService returns a service deciding with cfg (nil: no domain, every
// request answered OK) and keeping its counters in store (nil: a new
// memstore.New(0)). Each domain's limits live in the store
// table named "envoyrls/" followed by the domain, so that services
// sharing a store (several processes on one Redis) share their limits.
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
	s := &Service{store: st, opts: o, overrides: make(map[overrideKey]tableOrErr)}
	s.cur.Store(s.bind(cfg))
	return s
}

// SetConfig replaces the configuration, atomically: requests under way
// finish under the old one, later ones see the new one. A limit whose rule
// is unchanged (same domain, same algorithm, requests_per_unit, unit and
// burst) keeps its state, since it uses the same store table; a rule that
// changed starts afresh, as does everything when the store is not shared.
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

func (s *Service) bind(cfg *Config) *bound {
	given := cfg != nil
	if cfg == nil {
		cfg = &Config{}
	}
	b := &bound{cfg: cfg, given: given, tables: make([]tableOrErr, len(cfg.rules))}
	for _, r := range cfg.rules {
		if r.policy.IsZero() {
			continue
		}
		t, err := s.store.Table(tableName(r.domain), r.policy)
		if err != nil {
			err = fmt.Errorf("envoyrls: rule %s (%s:%d): %w", r.path, r.file, r.line, err)
			s.opts.log.Error("envoyrls: the store refused a rule's table", "err", err)
		}
		b.tables[r.id] = tableOrErr{t, err}
	}
	return b
}

func tableName(domain string) string { return "envoyrls/" + domain }

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
	// WithShadowMode).
	Shadow uint64
	// UnknownDomain counts the requests for a domain the configuration
	// does not have, answered OK with no limit.
	UnknownDomain uint64
	// Errors counts the requests answered with an error: bad input
	// (codes.InvalidArgument) or a failing store (codes.Unavailable),
	// and the bodies JSONHandler refused before asking.
	Errors uint64
}

// Stats returns the service's counts.
func (s *Service) Stats() Stats {
	return Stats{OK: s.ok.Load(), OverLimit: s.over.Load(), Shadow: s.shadow.Load(),
		UnknownDomain: s.unknown.Load(), Errors: s.errs.Load()}
}

func (s *Service) now() int64 {
	if s.opts.clock == nil {
		return clock.UnixNano()
	}
	return s.opts.clock.Now().UnixNano()
}

// ShouldRateLimit decides a request of Envoy's rate limit protocol; see
// the package documentation for the semantics. The errors it returns are
// gRPC status errors:
//
//   - codes.InvalidArgument: a nil request, an empty domain, no
//     descriptor, more than MaxDescriptors, a descriptor with
//     is_negative_hits (which would let a caller give itself quota), or a
//     limit override with no valid unit, a unit_multiplier taking the
//     window past 366 days, or requests_per_unit above floodgate's
//     maximum (algo.MaxLimit);
//   - codes.Unavailable: the store failed (or refused a rule's table);
//   - the context's code (Canceled, DeadlineExceeded) when it ended.
//
// Nothing is counted for a request refused as invalid; a store failure
// may come after some descriptors were counted, as with upstream.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp, err := s.shouldRateLimit(ctx, req)
	if err != nil {
		s.errs.Add(1)
		return nil, err
	}
	return resp, nil
}

// A check is what one descriptor of a request is decided by.
type check struct {
	r         *rule
	t         tableOrErr
	shared    []string
	unlimited bool
}

func (s *Service) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	switch {
	case req.GetDomain() == "":
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	case len(req.GetDescriptors()) == 0:
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case len(req.GetDescriptors()) > MaxDescriptors:
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors, more than the most, %d", len(req.Descriptors), MaxDescriptors)
	}
	for i, d := range req.Descriptors {
		if d.GetIsNegativeHits() {
			return nil, status.Errorf(codes.InvalidArgument, "descriptor %d: is_negative_hits is not supported: a request cannot give back quota", i)
		}
	}
	b := s.cur.Load()
	now := s.now()
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(req.Descriptors))}
	dom := b.cfg.domains[req.Domain]
	if dom == nil {
		// Upstream answers OK, with no limit, for a domain it does not know.
		for i := range resp.Statuses {
			resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		}
		s.unknown.Add(1)
		s.ok.Add(1)
		return resp, nil
	}

	// Find each descriptor's rule, then drop the unlimited and the
	// replaced ones, as upstream does: every rule found, unlimited ones
	// included, replaces the named rules of the other descriptors.
	checks := make([]check, len(req.Descriptors))
	var replacing map[string]bool
	for i, d := range req.Descriptors {
		c := &checks[i]
		if o := d.GetLimit(); o != nil {
			r, t, err := s.override(dom.name, o)
			if err != nil {
				return nil, err
			}
			c.r, c.t = r, t
		} else {
			c.r, c.shared = dom.lookup(d.GetEntries())
			if c.r != nil {
				c.t = b.tables[c.r.id]
			}
		}
		if c.r == nil {
			continue
		}
		for _, name := range c.r.replaces {
			if replacing == nil {
				replacing = make(map[string]bool)
			}
			replacing[name] = true
		}
		if c.r.unlimited {
			c.r, c.unlimited = nil, true
		}
	}
	// The descriptors to decide on the store, each with its cost and key.
	outs := make([]outcome, len(req.Descriptors))
	var todo []int
	for i, d := range req.Descriptors {
		c := &checks[i]
		switch {
		case c.unlimited:
			// Upstream's answer for an unlimited rule: OK, with the most
			// a uint32 holds remaining, and no limit.
			resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
		case c.r == nil || (c.r.name != "" && replacing[c.r.name]):
			resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		default:
			outs[i].n, outs[i].key = hits(req, d), storeKey(d.GetEntries(), c.shared)
			todo = append(todo, i)
		}
	}
	s.decideAll(ctx, checks, outs, todo, now)
	wouldBeOver := false
	for _, i := range todo {
		c, o := &checks[i], &outs[i]
		if o.err != nil {
			if ctxErr := ctx.Err(); ctxErr != nil {
				return nil, status.FromContextError(ctxErr).Err()
			}
			s.logStoreError(dom.name, c.r.path, o.err)
			return nil, status.Errorf(codes.Unavailable, "rate limit store: %v", o.err)
		}
		if s.opts.observer != nil {
			s.opts.observer(ctx, Outcome{Domain: dom.name, Rule: c.r.path, Name: c.r.name, Policy: c.r.policy, Hits: o.n, Over: o.over, Code: o.st.Code})
		}
		resp.Statuses[i] = o.st
		if o.over {
			wouldBeOver = true
		}
		if o.st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT && s.opts.shadow {
		resp.OverallCode = rlsv3.RateLimitResponse_OK
	}
	switch {
	case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
		s.over.Add(1)
	case wouldBeOver:
		s.shadow.Add(1)
		s.ok.Add(1)
	default:
		s.ok.Add(1)
	}
	return resp, nil
}

// outcome is one descriptor's decision: its cost and store key, then its
// status, whether it was over its limit, or the store's error.
type outcome struct {
	n    int64
	key  string
	st   *rlsv3.RateLimitResponse_DescriptorStatus
	over bool
	err  error
}

// decideAll decides the descriptors todo (indexes of checks and outs). On
// the memory store it decides them one after another. On another store,
// where each decision is a round trip (Redis) or a transaction (a file),
// the first descriptor of each counter goes in one call of the store's
// ApplyEach, each decided as if alone (on Redis, one script
// call: a request of many descriptors costs one round trip, as upstream's
// pipeline does); then the counters' later descriptors, rare, are decided
// one at a time in request order, after their counter's first and its
// saturation (see saturate), as upstream's increments would be.
func (s *Service) decideAll(ctx context.Context, checks []check, outs []outcome, todo []int, now int64) {
	one := func(i int) {
		o := &outs[i]
		o.st, o.over, o.err = s.decide(ctx, &checks[i], o.key, now, o.n)
	}
	if _, mem := s.store.(*memstore.Store); mem || len(todo) < 2 {
		for _, i := range todo {
			one(i)
		}
		return
	}
	type counter struct {
		t   store.Table
		key string
	}
	seen := make(map[counter]bool, len(todo))
	var first, later []int
	ops := make([]store.Op, 0, len(todo))
	for _, i := range todo {
		c := &checks[i]
		if !c.r.onStore() || c.t.err != nil {
			later = append(later, i) // decided without the store
			continue
		}
		k := counter{c.t.t, outs[i].key}
		if seen[k] {
			later = append(later, i)
			continue
		}
		seen[k] = true
		first = append(first, i)
		ops = append(ops, store.Op{Kind: store.OpDecide, Table: c.t.t, Key: outs[i].key, Now: now, N: outs[i].n})
	}
	if err := s.store.ApplyEach(ctx, ops); err != nil {
		for _, i := range todo {
			outs[i].err = err
		}
		return
	}
	for j, i := range first {
		o := &outs[i]
		o.st, o.over, o.err = s.status(ctx, &checks[i], o.key, now, ops[j].Result.Decision, ops[j].Result.Err)
	}
	for _, i := range later {
		one(i)
	}
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

// hits is a descriptor's cost: its own hits_addend when set (0 included:
// a check that counts nothing), else the request's, where 0 (unset)
// means 1. That is upstream's rule.
func hits(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	if h := d.GetHitsAddend(); h != nil {
		return int64(min(h.GetValue(), math.MaxInt64))
	}
	return int64(max(req.GetHitsAddend(), 1))
}

// decide decides one descriptor: its status, and whether it was over its
// limit (even if shadow_mode answers OK).
func (s *Service) decide(ctx context.Context, c *check, key string, now, n int64) (st *rlsv3.RateLimitResponse_DescriptorStatus, over bool, err error) {
	var d algo.Decision
	if c.r.onStore() && c.t.err == nil {
		d, err = c.t.t.Decide(ctx, key, now, n)
	}
	return s.status(ctx, c, key, now, d, err)
}

// onStore reports whether the rule's descriptors are decided on the store:
// a limit of 0 (upstream's blacklist) is over without it.
func (r *rule) onStore() bool { return r.perUnit != 0 }

// status makes a descriptor's status from its decision d and error err on
// the store, for key at now.
func (s *Service) status(ctx context.Context, c *check, key string, now int64, d algo.Decision, err error) (st *rlsv3.RateLimitResponse_DescriptorStatus, over bool, _ error) {
	r := c.r
	st = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: r.current()}
	var reset time.Duration
	switch {
	case !r.onStore():
		over = true // upstream's blacklist: every request is over a limit of 0
	case c.t.err != nil:
		return nil, false, c.t.err
	default:
		if err != nil && !errors.Is(err, algo.ErrCostExceedsBurst) {
			return nil, false, err
		}
		if !d.Allowed && r.upstream {
			if err := saturate(ctx, c.t.t, key, now, d.Remaining); err != nil {
				return nil, false, err
			}
		}
		over = !d.Allowed
		switch {
		case over:
			reset = d.RetryAfter
			if reset == algo.Never {
				reset = d.ResetAfter
			}
		default:
			st.LimitRemaining = uint32(d.Remaining)
			reset = d.ResetAfter
		}
	}
	if r.upstream || !r.onStore() {
		st.DurationUntilReset = windowReset(now, r.period)
	} else {
		st.DurationUntilReset = wholeSeconds(reset)
	}
	if over {
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		if r.shadow {
			st.Code = rlsv3.RateLimitResponse_OK
		}
	}
	return st, over, nil
}

// saturate spends what is left of a fixed window that just denied a
// request. Upstream's counter adds every request's hits, denied or not,
// so that once a request has gone over the limit every later one in the
// window is over too, even one that would fit in what was left; spending
// the rest gives floodgate's window the same answers. It retries when a
// concurrent request spent some of the rest first.
func saturate(ctx context.Context, t store.Table, key string, now, rest int64) error {
	for range 4 {
		if rest <= 0 {
			return nil
		}
		d, err := t.Decide(ctx, key, now, rest)
		if err != nil || d.Allowed {
			return err
		}
		rest = d.Remaining
	}
	return nil
}

// windowReset is upstream's duration_until_reset for a fixed window: the
// window's length in seconds minus the whole seconds elapsed in it.
func windowReset(now int64, period time.Duration) *durationpb.Duration {
	sec := int64(period / time.Second)
	nowSec := now / int64(time.Second)
	return &durationpb.Duration{Seconds: sec - nowSec%sec}
}

// wholeSeconds rounds d up to whole seconds: Envoy reads only the seconds
// of duration_until_reset (for the X-RateLimit-Reset header), and 0.2s
// read as 0 would say the limit has reset already.
func wholeSeconds(d time.Duration) *durationpb.Duration {
	return &durationpb.Duration{Seconds: seconds.Ceil(d)}
}

// current is the rule's limit as a status reports it.
func (r *rule) current() *rlsv3.RateLimitResponse_RateLimit {
	l := &rlsv3.RateLimitResponse_RateLimit{Name: r.name, RequestsPerUnit: r.perUnit, Unit: r.unit}
	if r.multiplier > 1 {
		l.UnitMultiplier = wrapperspb.UInt32(r.multiplier)
	}
	return l
}

// override returns the rule and table of a limit a request carries
// (RateLimitDescriptor.limit, set by Envoy's limit override): a fixed
// window, like upstream's, that replaces the configuration's rule for the
// descriptor, with no name, replaces or shadow mode. The request's domain
// must be known, as upstream requires.
func (s *Service) override(domainName string, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) (*rule, tableOrErr, error) {
	unit := rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit())
	u, ok := units[unit.String()]
	if !ok || unit == rlsv3.RateLimitResponse_RateLimit_UNKNOWN {
		return nil, tableOrErr{}, status.Errorf(codes.InvalidArgument, "limit override: unit %v is not a rate limit unit", o.GetUnit())
	}
	r := &rule{path: domainName + " (override)", perUnit: o.GetRequestsPerUnit(), unit: u.unit, period: u.period, upstream: true}
	if m := o.GetUnitMultiplier().GetValue(); m > 1 {
		if time.Duration(m) > algo.MaxPeriod/u.period {
			return nil, tableOrErr{}, status.Errorf(codes.InvalidArgument, "limit override: a window of %d %v is longer than 366 days", m, u.unit)
		}
		r.multiplier, r.period = m, u.period*time.Duration(m)
	}
	if r.perUnit == 0 {
		return r, tableOrErr{}, nil
	}
	if r.perUnit > algo.MaxLimit {
		return nil, tableOrErr{}, status.Errorf(codes.InvalidArgument, "limit override: requests_per_unit %d is more than the most, %d", r.perUnit, algo.MaxLimit)
	}
	p, err := algo.New(algo.FixedWindow, int64(r.perUnit), r.period, 0)
	if err != nil {
		return nil, tableOrErr{}, status.Errorf(codes.InvalidArgument, "limit override: %v", err)
	}
	r.policy = p
	k := overrideKey{domainName, r.policy}
	s.omu.Lock()
	t, ok := s.overrides[k]
	s.omu.Unlock()
	if !ok {
		tt, err := s.store.Table(tableName(domainName), r.policy)
		t = tableOrErr{tt, err}
		s.omu.Lock()
		if len(s.overrides) < maxOverrides && err == nil {
			s.overrides[k] = t
		}
		s.omu.Unlock()
	}
	return r, t, nil
}
