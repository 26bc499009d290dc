package envoyrls

import (
	"context"
	"errors"
	"math"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/seconds"
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

// decideOnStore decides the descriptors ds[todo] through their limiters
// by floodgate.AllowEachAt, at now, each as if alone, in one step of the
// store (on Redis, one script call for the whole request, as upstream
// pipelines its increments), each costing its hits and the hits owed to
// its counter.
//
// A fixed window's limiter is its domain's counter for that window
// length (see counterPolicy), which counts every hit, as upstream's
// counter does: decided turns the count into the rule's answer.
func (s *Service) decideOnStore(ctx context.Context, ds []desc, todo []int, now int64) {
	at := time.Unix(0, now)
	var fewChecks [4]floodgate.Check
	checks := fewChecks[:0]
	for _, i := range todo {
		d := &ds[i]
		n := d.n
		if d.owed > 0 {
			n = min(n, math.MaxInt64-d.owed) + d.owed
		}
		checks = append(checks, floodgate.Check{Limiter: d.l.l, Key: d.key, N: n, Peek: n == 0})
	}
	failed := false
	allowEachAt(ctx, at, checks, func(j int, dec floodgate.Decision, err error) {
		if err := ds[todo[j]].decided(dec, err); err != nil {
			failed = true
		}
	})
	if !failed {
		saturate(ctx, ds, todo, at)
	}
}

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

// counterLimit is the most hits a fixed window's counter counts: the
// largest requests_per_unit, a uint32 in Envoy's protocol and upstream's
// configuration. A compact policy (algo.Policy.Compact), so that a
// counter takes a memory store 16 bytes.
const counterLimit = math.MaxUint32

// counterPolicy is the policy of the counters of the fixed windows of
// length period: a fixed window that admits all but more than
// counterLimit hits, since requests_per_unit is at most that. Every
// fixed-window limit of a domain with that window, configured or carried
// by a request, counts a descriptor's hits on that one counter, whatever
// its requests_per_unit, as upstream's counter key names no limit: a
// limit override shares the configured rule's count, and a rule whose
// requests_per_unit changed keeps its count.
func counterPolicy(period time.Duration) (algo.Policy, error) {
	return algo.New(algo.FixedWindow, counterLimit, period, 0)
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

// decided sets the descriptor's decision and returns its error, if it
// has one: a cost above the burst is a denial like another. For a fixed
// window, the decision is its counter's: the hits counted in the window
// (this descriptor's included) are counterLimit less what it has left,
// and the descriptor is over when they are more than requests_per_unit,
// as upstream's; a counter that refused the hits is past every limit.
// An admission that knows no count (FailOpen) is not over.
func (d *desc) decided(dec floodgate.Decision, err error) error {
	d.d = dec
	if err != nil && !errors.Is(err, algo.ErrCostExceedsBurst) {
		d.err = err
		return err
	}
	if !d.r.upstream {
		d.over, d.remaining = !dec.Allowed || dec.DryRun, dec.Remaining
		return nil
	}
	if dec.Allowed && dec.Remaining == 0 && dec.ResetAfter == 0 {
		// Admitted with no count known: failsafe's FailOpen while the
		// store is down (a counter that counted has the rest of its
		// window to reset). Through, as a bucket's would be.
		d.over, d.remaining = false, 0
		return nil
	}
	count := counterLimit - dec.Remaining
	d.over = !dec.Allowed || count > int64(d.r.perUnit)
	if !d.over {
		d.remaining = int64(d.r.perUnit) - count
	}
	return nil
}

// saturate fills the counters of the descriptors of batch that the
// counter refused (a cost of more than it has left of counterLimit),
// so that every later request in the window is over, as upstream's
// counter, which takes any cost, would have them. It retries those that
// a concurrent request spent some of first. An error is the
// descriptor's.
func saturate(ctx context.Context, ds []desc, batch []int, at time.Time) {
	var checks []floodgate.Check
	var idx []int
	for _, i := range batch {
		if d := &ds[i]; d.r.upstream && !d.d.Allowed && d.d.Remaining > 0 {
			checks = append(checks, floodgate.Check{Limiter: d.l.l, Key: d.key, N: d.d.Remaining})
			idx = append(idx, i)
		}
	}
	for range 4 {
		if len(checks) == 0 {
			return
		}
		failed := false
		rest, restIdx := checks[:0], idx[:0] // those still short, in place
		allowEachAt(ctx, at, checks, func(j int, d floodgate.Decision, err error) {
			switch {
			case failed:
			case err != nil:
				ds[idx[j]].err, failed = err, true
			case !d.Allowed && d.Remaining > 0:
				c := checks[j]
				c.N = d.Remaining
				rest, restIdx = append(rest, c), append(restIdx, idx[j])
			}
		})
		if failed {
			return
		}
		checks, idx = rest, restIdx
	}
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
