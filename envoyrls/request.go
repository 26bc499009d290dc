package envoyrls

import (
	"context"
	"math"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algo"
)

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

// hits is a descriptor's cost: its own hits_addend when set (0 included:
// a check that counts nothing), else the request's, where 0 (unset)
// means 1. That is upstream's rule.
func hits(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	if h := d.GetHitsAddend(); h != nil {
		return int64(min(h.GetValue(), math.MaxInt64))
	}
	return int64(max(req.GetHitsAddend(), 1))
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
