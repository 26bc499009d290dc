package envoyrls

import (
	"context"
	"math"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
)

// ShouldRateLimit decides a request of Envoy's rate limit protocol; see
// the package documentation for the semantics. The errors it returns are
// gRPC status errors:
//
//   - codes.InvalidArgument: a nil request, an empty domain, no
//     descriptor, more than MaxDescriptors, a descriptor with
//     is_negative_hits (which would let a caller give itself quota), or a
//     limit override with no valid unit or a unit_multiplier taking the
//     window past 366 days;
//   - codes.Unavailable: the store failed (or refused a rule's table);
//   - the context's code (Canceled, DeadlineExceeded) when it ended.
//
// Nothing is counted for a request refused as invalid; a store failure
// may come after some descriptors were counted, as with upstream.
// Upstream's errors have no code (gRPC sends them as codes.Unknown), so
// that its answer to an empty domain or no descriptor is Unknown where
// this one's is InvalidArgument, with the same message.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	resp, err := s.shouldRateLimit(ctx, req)
	if err != nil {
		s.errs.Add(1)
		return nil, err
	}
	return resp, nil
}

func (s *Service) shouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := validate(req); err != nil {
		return nil, err
	}
	b := s.cur.Load()
	now := s.now()
	dom := b.cfg.domains[req.Domain]
	if dom == nil {
		// Upstream answers OK, with no limit, for a domain it does not know.
		s.unknown.Add(1)
		s.ok.Add(1)
		return s.withMetadata(req, allOK(len(req.Descriptors)), nil), nil
	}
	ds, err := s.match(b, dom, req)
	if err != nil {
		return nil, err
	}
	s.decide(ctx, dom.name, ds, now)
	resp, err := s.answer(ctx, dom.name, ds, now)
	if err != nil {
		return nil, err
	}
	s.withMetadata(req, resp, ds)
	switch {
	case resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT:
		s.over.Add(1)
	case s.shadowed(ds):
		s.shadow.Add(1)
		s.ok.Add(1)
	default:
		s.ok.Add(1)
	}
	return resp, nil
}

// validate returns the error of codes.InvalidArgument for a request that
// cannot be decided, nil for the others.
func validate(req *rlsv3.RateLimitRequest) error {
	switch {
	case req.GetDomain() == "":
		return status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	case len(req.GetDescriptors()) == 0:
		return status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	case len(req.GetDescriptors()) > MaxDescriptors:
		return status.Errorf(codes.InvalidArgument, "%d descriptors, more than the most, %d", len(req.Descriptors), MaxDescriptors)
	}
	for i, d := range req.Descriptors {
		if d.GetIsNegativeHits() {
			return status.Errorf(codes.InvalidArgument, "descriptor %d: is_negative_hits is not supported: a request cannot give back quota", i)
		}
	}
	return nil
}

// allOK is the answer of n statuses OK, with no limit.
func allOK(n int) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)}
	for i := range resp.Statuses {
		resp.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	}
	return resp
}

// A desc is one descriptor of a request as the service decides it: its
// rule (nil for no limit: none matched, or another descriptor's rule
// replaces it) and the rule's limiter, its store key and cost, then its
// decision (see desc.decided), or the error that kept it from one.
type desc struct {
	r   *rule
	l   limiter
	key string
	n   int64
	// owed are the hits answered from memory that the store is asked to
	// add with the descriptor's own (see overCounts.answer).
	owed int64
	d    floodgate.Decision // the limiter's, for floodgate's algorithms
	// count is a fixed window's counter's count, this descriptor's hits
	// included (see desc.counted).
	count int64
	// over reports whether the descriptor was over its rule's limit
	// (and let through, in shadow mode); remaining is what the rule
	// has left when it is not.
	over      bool
	remaining int64
	err       error
}

// limited reports whether the descriptor is decided against a limit: it
// has a rule, and the rule is not unlimited.
func (d *desc) limited() bool { return d.r != nil && !d.r.unlimited }

// match finds each descriptor's rule and limiter, as upstream does: the
// limit the descriptor carries, else its domain's rule for its entries.
// Then every rule found, unlimited ones included, replaces the named
// rules of the other descriptors, which are not decided at all.
func (s *Service) match(b *bound, dom *domain, req *rlsv3.RateLimitRequest) ([]desc, error) {
	ds := make([]desc, len(req.Descriptors))
	var replaced map[string]bool
	for i, rd := range req.Descriptors {
		d := &ds[i]
		var shared []string
		if o := rd.GetLimit(); o != nil {
			r, l, err := s.override(dom.name, o)
			if err != nil {
				return nil, err
			}
			d.r, d.l = r, l
		} else if d.r, shared = dom.lookup(rd.GetEntries()); d.r != nil {
			d.l = b.limiters[d.r.id]
		}
		if d.r == nil {
			continue
		}
		for _, name := range d.r.replaces {
			if replaced == nil {
				replaced = make(map[string]bool)
			}
			replaced[name] = true
		}
		if !d.r.unlimited {
			d.key, d.n = storeKey(rd.GetEntries(), shared), hits(req, rd)
		}
	}
	for i := range ds {
		if d := &ds[i]; d.limited() && d.r.name != "" && replaced[d.r.name] {
			d.r = nil
		}
	}
	return ds, nil
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

// messages are the messages of one descriptor's status, which answer
// allocates for all the descriptors of a request at once.
type messages struct {
	status rlsv3.RateLimitResponse_DescriptorStatus
	limit  rlsv3.RateLimitResponse_RateLimit
	reset  durationpb.Duration
}

// A response1 is the response to a request of one descriptor, the
// commonest, with its status's messages, in one allocation.
type response1 struct {
	resp     rlsv3.RateLimitResponse
	statuses [1]*rlsv3.RateLimitResponse_DescriptorStatus
	msgs     [1]messages
}

// newResponse returns a response of overall code OK with room for n
// statuses, and the messages of each.
func newResponse(n int) (*rlsv3.RateLimitResponse, []messages) {
	if n == 1 {
		r := &response1{}
		r.resp.OverallCode, r.resp.Statuses = rlsv3.RateLimitResponse_OK, r.statuses[:]
		return &r.resp, r.msgs[:]
	}
	return &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, n)}, make([]messages, n)
}

// answer makes the response from the descriptors' decisions, reporting
// each to the observer; or, at the first descriptor in the request's
// order that has no decision, the error that kept it from one.
func (s *Service) answer(ctx context.Context, domainName string, ds []desc, now int64) (*rlsv3.RateLimitResponse, error) {
	resp, msgs := newResponse(len(ds))
	var v verdict
	for i := range ds {
		d, m := &ds[i], &msgs[i]
		switch {
		case d.r == nil:
			m.status.Code = rlsv3.RateLimitResponse_OK
			resp.Statuses[i] = &m.status
			v.add(m.status.Code, s.inQuotaMode(d))
		case d.r.unlimited:
			// Upstream's answer for an unlimited rule: OK, with the most
			// a uint32 holds remaining, and no limit.
			m.status.Code, m.status.LimitRemaining = rlsv3.RateLimitResponse_OK, math.MaxUint32
			resp.Statuses[i] = &m.status
		case d.err != nil:
			return nil, s.storeError(ctx, domainName, d.r.path, d.err)
		default:
			st := d.status(now, m)
			if s.opts.observer != nil {
				s.opts.observer(ctx, Outcome{Domain: domainName, Rule: d.r.path, Name: d.r.name, Policy: d.r.policy, Hits: d.n, Over: d.over, Code: st.Code})
			}
			resp.Statuses[i] = st
			v.add(st.Code, s.inQuotaMode(d))
		}
	}
	resp.OverallCode = v.code(s.opts.shadow)
	if s.opts.headers != NoHeaders {
		if i := binding(resp.Statuses, func(j int) bool { return s.inQuotaMode(&ds[j]) }); i >= 0 {
			resp.ResponseHeadersToAdd = s.opts.headers.responseHeaders(domainName, &ds[i], resp.Statuses[i])
		}
	}
	return resp, nil
}

// inQuotaMode reports whether the descriptor is in quota mode: its
// rule's quota_mode, or WithQuotaMode.
func (s *Service) inQuotaMode(d *desc) bool { return s.opts.quota || (d.r != nil && d.r.quota) }

// A verdict tallies the statuses of a request's descriptors (but those
// of unlimited rules) into the answer's overall code, as upstream does:
// OVER_LIMIT when a descriptor not in quota mode is, or when every
// descriptor in quota mode is, and there is one; OK in shadow mode
// (WithShadowMode). A descriptor in quota mode (quota_mode, or
// WithQuotaMode) that is over its limit keeps its status OVER_LIMIT:
// the caller reads the statuses to choose among several quotas.
type verdict struct{ over, quota, quotaOver int }

func (v *verdict) add(code rlsv3.RateLimitResponse_Code, quota bool) {
	over := code == rlsv3.RateLimitResponse_OVER_LIMIT
	switch {
	case quota && over:
		v.quota++
		v.quotaOver++
	case quota:
		v.quota++
	case over:
		v.over++
	}
}

func (v *verdict) code(shadow bool) rlsv3.RateLimitResponse_Code {
	if !shadow && (v.over > 0 || (v.quota > 0 && v.quotaOver == v.quota)) {
		return rlsv3.RateLimitResponse_OVER_LIMIT
	}
	return rlsv3.RateLimitResponse_OK
}

// withMetadata sets resp's dynamic metadata, with WithDynamicMetadata,
// and returns resp; ds are the request's descriptors as decided, nil when
// its domain is unknown.
func (s *Service) withMetadata(req *rlsv3.RateLimitRequest, resp *rlsv3.RateLimitResponse, ds []desc) *rlsv3.RateLimitResponse {
	if s.opts.dynamicMetadata {
		resp.DynamicMetadata = dynamicMetadata(req, resp.Statuses, ds)
	}
	return resp
}

// shadowed reports whether a descriptor was over its limit but let
// through by shadow mode (its rule's, or the service's).
func (s *Service) shadowed(ds []desc) bool {
	for i := range ds {
		if d := &ds[i]; d.limited() && d.over && (d.r.shadow || s.opts.shadow) {
			return true
		}
	}
	return false
}

// storeError is the answer to a request whose descriptor of the rule
// rulePath failed with err: the context's code when it ended, else
// codes.Unavailable, logged.
func (s *Service) storeError(ctx context.Context, domainName, rulePath string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return status.FromContextError(ctxErr).Err()
	}
	s.logStoreError(domainName, rulePath, err)
	return status.Errorf(codes.Unavailable, "rate limit store: %v", err)
}

// override returns the rule and limiter of a limit a request carries
// (RateLimitDescriptor.limit, set by Envoy's limit override): a fixed
// window, like upstream's, that replaces the configuration's rule for the
// descriptor, with no name, replaces or shadow mode, and counts on the
// domain's counter for its window, as the rule does.
// The request's domain must be known, as upstream requires.
func (s *Service) override(domainName string, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) (*rule, limiter, error) {
	r, err := overrideRule(domainName, o)
	if err != nil {
		return nil, limiter{}, err
	}
	k := counterKey{domainName, r.period}
	s.omu.Lock()
	c := s.overrides[k]
	s.omu.Unlock()
	if c != nil {
		return r, limiter{c: c}, nil
	}
	c, err = s.newCounter(domainName, r.period)
	if err != nil {
		return r, limiter{err: err}, nil
	}
	s.omu.Lock()
	if len(s.overrides) < maxOverrides {
		s.overrides[k] = c
	}
	s.omu.Unlock()
	return r, limiter{c: c}, nil
}

// overrideRule checks a limit a request carries and returns its rule.
func overrideRule(domainName string, o *ratelimitv3.RateLimitDescriptor_RateLimitOverride) (*rule, error) {
	unit := rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit())
	u, ok := units[unit.String()]
	if !ok || unit == rlsv3.RateLimitResponse_RateLimit_UNKNOWN {
		return nil, status.Errorf(codes.InvalidArgument, "limit override: unit %v is not a rate limit unit", o.GetUnit())
	}
	r := &rule{domain: domainName, path: domainName + " (override)", perUnit: o.GetRequestsPerUnit(), unit: u.unit, period: u.period, upstream: true}
	if m := o.GetUnitMultiplier().GetValue(); m > 1 {
		if time.Duration(m) > algo.MaxPeriod/u.period {
			return nil, status.Errorf(codes.InvalidArgument, "limit override: a window of %d %v is longer than 366 days", m, u.unit)
		}
		r.multiplier, r.period = m, u.period*time.Duration(m)
	}
	if r.perUnit == 0 {
		return r, nil
	}
	p, err := algo.New(algo.FixedWindow, int64(r.perUnit), r.period, 0)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "limit override: %v", err)
	}
	r.policy = p
	return r, nil
}
