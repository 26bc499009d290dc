package envoyrls

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/seconds"
	"github.com/floodgate/floodgate/store"
)

// decide decides the descriptors of a request of the domain that have a
// limit, all at now. A rule of floodgate's algorithms with
// requests_per_unit 0 is over without the store, and so is a fixed window
// whose counter is known to be over the rule's limit (overCounts.answer).
// The others are decided on the store (decideOnStore); a descriptor's
// error is in its desc.
func (s *Service) decide(ctx context.Context, domainName string, ds []desc, now int64) {
	var few [8]int
	todo := few[:0]
	for i := range ds {
		switch d := &ds[i]; {
		case !d.limited():
		case !d.r.onStore():
			d.decided(s.blocked(d.r), nil)
		case d.l.err != nil:
			d.err = d.l.err
		case d.r.upstream && s.local.answer(s, domainName, d, now):
		default:
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return
	}
	s.local.writing.RLock()
	defer s.local.writing.RUnlock()
	s.decideOnStore(ctx, ds, todo, now)
	s.local.learn(domainName, ds, todo, now)
}

// decideOnStore decides the descriptors ds[todo] on the store, at now,
// each as if alone, each costing its hits and the hits owed to its
// counter: the fixed windows' on their counters (count), the others'
// through their limiters (decideLimits), both at once.
func (s *Service) decideOnStore(ctx context.Context, ds []desc, todo []int, now int64) {
	var fewFixed, fewLimits [8]int
	fixed, limits := fewFixed[:0], fewLimits[:0]
	for _, i := range todo {
		if ds[i].r.upstream {
			fixed = append(fixed, i)
		} else {
			limits = append(limits, i)
		}
	}
	if len(limits) == 0 {
		count(ctx, ds, fixed, now)
		return
	}
	var wg sync.WaitGroup
	if len(fixed) > 0 {
		wg.Go(func() { count(ctx, ds, fixed, now) })
	}
	decideLimits(ctx, ds, limits, now)
	wg.Wait()
}

// cost is a descriptor's cost on the store: its hits and those owed to its
// counter.
func (d *desc) cost() int64 {
	if d.owed > 0 {
		return min(d.n, math.MaxInt64-d.owed) + d.owed
	}
	return d.n
}

// count adds the hits of the fixed-window descriptors ds[fixed] to their
// counters, those of one domain and window length (the same counters,
// whichever rule's or limit override's) in one store.Counters.AddEach (on Redis, one pipeline of INCRBY and PEXPIRE, as
// upstream's), as upstream's counter counts every hit: decided turns the
// count into the rule's answer.
func count(ctx context.Context, ds []desc, fixed []int, now int64) {
	for len(fixed) > 0 {
		first := &ds[fixed[0]]
		c, k := first.l.c, first.r.counterKey()
		var hs []store.Hits
		rest := fixed[:0] // those of other counters, in place
		var idx []int
		for _, i := range fixed {
			if d := &ds[i]; d.r.counterKey() == k {
				hs, idx = append(hs, store.Hits{Key: d.key, Now: now, N: d.cost()}), append(idx, i)
			} else {
				rest = append(rest, i)
			}
		}
		err := c.AddEach(ctx, hs)
		for j, i := range idx {
			h := &hs[j]
			switch {
			case h.Err != nil:
				ds[i].err = h.Err
			case err != nil && !errors.Is(err, store.ErrPartialFailure):
				ds[i].err = err
			default:
				ds[i].counted(h)
			}
		}
		fixed = rest
	}
}

// counted sets a fixed-window descriptor's answer from its counter's
// count: over when the count is more than requests_per_unit, as
// upstream's. A count the store does not know (failsafe's FailOpen) is
// not over.
func (d *desc) counted(h *store.Hits) {
	d.count, d.over, d.remaining = h.Count, h.Count > int64(d.r.perUnit), 0
	if !d.over && !h.Unknown {
		d.remaining = int64(d.r.perUnit) - h.Count
	}
}

// decideLimits decides the descriptors ds[limits] of floodgate's
// algorithms through their limiters by floodgate.AllowEachAt, at now,
// each as if alone, in one step of the store (on Redis, one script call
// for the whole request).
func decideLimits(ctx context.Context, ds []desc, limits []int, now int64) {
	at := time.Unix(0, now)
	var fewChecks [4]floodgate.Check
	checks := fewChecks[:0]
	for _, i := range limits {
		d := &ds[i]
		checks = append(checks, floodgate.Check{Limiter: d.l.l, Key: d.key, N: d.n, Peek: d.n == 0})
	}
	allowEachAt(ctx, at, checks, func(j int, dec floodgate.Decision, err error) {
		ds[limits[j]].decided(dec, err)
	})
}

// counterKey names the counters of the rule, a fixed window.
func (r *rule) counterKey() counterKey { return counterKey{r.domain, r.period} }

// onStore reports whether the rule's descriptors are decided on the
// store: all but the rules of floodgate's algorithms with a limit of 0,
// which are over without it. A fixed window of 0 is counted, as
// upstream's is: a check of 0 hits on an unused window is not over.
func (r *rule) onStore() bool { return r.upstream || r.perUnit != 0 }

// blocked is the decision of a rule of requests_per_unit 0: over, or in
// shadow mode let through as a dry run's denial, as its limiter would.
func (s *Service) blocked(r *rule) floodgate.Decision {
	dry := r.shadow || s.opts.shadow
	return floodgate.Decision{Allowed: dry, DryRun: dry}
}

// allowEachAt decides checks at one instant, as floodgate.AllowEachAt,
// and passes f each check's decision and error. One check is its
// limiter's AllowAt instead, which on a store that batches concurrent
// calls (Redis) joins them, where ApplyEach is a round trip of its own.
func allowEachAt(ctx context.Context, at time.Time, checks []floodgate.Check, f func(j int, d floodgate.Decision, err error)) {
	if len(checks) == 1 {
		c := checks[0]
		d, err := c.Limiter.AllowAt(ctx, c.Key, at, c.N)
		f(0, d, err)
		return
	}
	ds, errs := floodgate.AllowEachAt(ctx, at, checks...)
	for j := range ds {
		var err error
		if errs != nil {
			err = errs[j]
		}
		f(j, ds[j], err)
	}
}

// decided sets the decision of a descriptor of floodgate's algorithms
// (or of a limit of 0), or its error: a cost above the burst is a denial
// like another.
func (d *desc) decided(dec floodgate.Decision, err error) {
	d.d = dec
	if err != nil && !errors.Is(err, algo.ErrCostExceedsBurst) {
		d.err = err
		return
	}
	d.over, d.remaining = !dec.Allowed || dec.DryRun, dec.Remaining
}

// status sets m to a decided descriptor's status, and returns it. Shadow
// mode answers OK for an over descriptor of a rule in shadow_mode, and
// OVER_LIMIT for the others, which WithShadowMode lets through with the
// overall code alone.
func (d *desc) status(now int64, m *messages) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &m.status
	st.Code, st.CurrentLimit = rlsv3.RateLimitResponse_OK, d.r.current(&m.limit)
	m.reset.Seconds, st.DurationUntilReset = d.untilReset(now), &m.reset
	switch {
	case d.over && !d.r.shadow:
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	case !d.over:
		st.LimitRemaining = uint32(d.remaining)
	}
	return st
}

// untilReset is a decided descriptor's duration_until_reset, in seconds:
// for a fixed window (and a limit of 0), upstream's, until the window
// ends; for floodgate's algorithms, the time until a denied request would
// be admitted, or else until the limit is back to its initial state.
func (d *desc) untilReset(now int64) int64 {
	switch r := d.r; {
	case r.upstream || !r.onStore():
		return windowReset(now, r.period)
	case d.over && d.d.RetryAfter != algo.Never:
		return seconds.Ceil(d.d.RetryAfter)
	}
	// Envoy reads only the seconds (for the X-RateLimit-Reset header),
	// and 0.2s read as 0 would say the limit has reset already: round up.
	return seconds.Ceil(d.d.ResetAfter)
}

// windowReset is upstream's duration_until_reset for a fixed window, in
// seconds: the window's length minus the whole seconds elapsed in it.
func windowReset(now int64, period time.Duration) int64 {
	sec := int64(period / time.Second)
	return sec - now/int64(time.Second)%sec
}

// current sets l to the rule's limit as a status reports it, and returns
// it.
func (r *rule) current(l *rlsv3.RateLimitResponse_RateLimit) *rlsv3.RateLimitResponse_RateLimit {
	l.Name, l.RequestsPerUnit, l.Unit = r.name, r.perUnit, r.unit
	if r.multiplier > 1 {
		l.UnitMultiplier = wrapperspb.UInt32(r.multiplier)
	}
	return l
}
