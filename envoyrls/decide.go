package envoyrls

import (
	"context"
	"errors"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/seconds"
)

// decide decides the descriptors of a request that have a limit, all at
// now. A rule of requests_per_unit 0 is over without the store. The
// others are decided through their limiters by floodgate.AllowEachAt,
// each as if alone, in one step of the store (on Redis, one script call
// for the whole request, as upstream pipelines its increments), in
// rounds when a fixed window's counter appears more than once (see
// rounds). Once a round fails, the later rounds' descriptors fail with
// its error, undecided; a descriptor's error is in its desc.
func (s *Service) decide(ctx context.Context, ds []desc, now int64) {
	var few [8]int
	todo := few[:0]
	for i := range ds {
		switch d := &ds[i]; {
		case !d.limited():
		case !d.r.onStore():
			d.d = s.blocked(d.r)
		case d.l.err != nil:
			d.err = d.l.err
		default:
			todo = append(todo, i)
		}
	}
	at := time.Unix(0, now)
	last := rounds(ds, todo)
	for round := 0; round <= last; round++ {
		batch := todo
		if last > 0 {
			batch = inRound(ds, todo, round)
		}
		if err := decideRound(ctx, ds, batch, at); err != nil {
			for _, i := range todo {
				if ds[i].round > round {
					ds[i].err = err
				}
			}
			return
		}
	}
}

// onStore reports whether the rule's descriptors are decided on the store:
// a limit of 0 (upstream's blacklist) is over without it.
func (r *rule) onStore() bool { return r.perUnit != 0 }

// blocked is the decision of a rule of requests_per_unit 0: over, or in
// shadow mode let through as a dry run's denial, as its limiter would.
func (s *Service) blocked(r *rule) floodgate.Decision {
	dry := r.shadow || s.opts.shadow
	return floodgate.Decision{Allowed: dry, DryRun: dry}
}

// rounds puts the descriptors todo (indexes of ds) in rounds, and
// returns the last: the k-th descriptor of a fixed window's counter (its
// table and key) goes in round k, and all the others in round 0. Upstream
// adds a request's increments up, in order, so that a descriptor is
// decided after the earlier ones of its counter, and after the
// saturation of those that went over (see saturate): that takes a round
// of its own. AllowEach decides the descriptors of one counter in order
// too, so the other algorithms, which need no saturation, need no round.
// Nearly every request has one round. Every limiter of a request has its
// domain's name, so that a counter is a policy and a key.
func rounds(ds []desc, todo []int) (last int) {
	if len(todo) < 2 {
		return 0
	}
	if len(todo) > maxScan {
		return roundsOfMany(ds, todo)
	}
	for j, i := range todo {
		d := &ds[i]
		if !d.r.upstream {
			continue
		}
		for _, e := range todo[:j] {
			if ds[e].r.policy == d.r.policy && ds[e].key == d.key {
				d.round++
			}
		}
		last = max(last, d.round)
	}
	return last
}

// maxScan is the most descriptors whose rounds rounds finds by comparing
// each with those before it, rather than with a map.
const maxScan = 8

// roundsOfMany is rounds for more than maxScan descriptors.
func roundsOfMany(ds []desc, todo []int) (last int) {
	type counter struct {
		p   algo.Policy
		key string
	}
	seen := make(map[counter]int)
	for _, i := range todo {
		d := &ds[i]
		if !d.r.upstream {
			continue
		}
		k := counter{d.r.policy, d.key}
		d.round = seen[k]
		seen[k] = d.round + 1
		last = max(last, d.round)
	}
	return last
}

// inRound returns the descriptors of todo in round.
func inRound(ds []desc, todo []int, round int) []int {
	var batch []int
	for _, i := range todo {
		if ds[i].round == round {
			batch = append(batch, i)
		}
	}
	return batch
}

// decideRound decides the descriptors batch (indexes of ds) at one
// instant, then saturates the fixed windows that went over. It returns
// the first error, which it also sets on the descriptors that it kept
// from a decision.
func decideRound(ctx context.Context, ds []desc, batch []int, at time.Time) error {
	if len(batch) == 1 { // the usual request: see allowEachAt
		d := &ds[batch[0]]
		if err := d.decided(d.l.l.AllowAt(ctx, d.key, at, d.n)); err != nil {
			return err
		}
		return saturate(ctx, ds, batch, at)
	}
	var few [4]floodgate.Check
	checks := few[:0]
	for _, i := range batch {
		checks = append(checks, floodgate.Check{Limiter: ds[i].l.l, Key: ds[i].key, N: ds[i].n, Peek: ds[i].n == 0})
	}
	var first error
	allowEachAt(ctx, at, checks, func(j int, dec floodgate.Decision, err error) {
		if err := ds[batch[j]].decided(dec, err); err != nil && first == nil {
			first = err
		}
	})
	if first != nil {
		return first
	}
	return saturate(ctx, ds, batch, at)
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
// has one: a cost above the burst is a denial like another.
func (d *desc) decided(dec floodgate.Decision, err error) error {
	d.d = dec
	if err != nil && !errors.Is(err, algo.ErrCostExceedsBurst) {
		d.err = err
		return err
	}
	return nil
}

// saturate spends what is left of the fixed windows of batch that a
// descriptor went over. Upstream's counter adds every request's hits,
// denied or not, so that once a request has gone over the limit every
// later one in the window is over too, even one that would fit in what
// was left; spending the rest gives floodgate's window the same answers.
// It retries those that a concurrent request spent some of first. An
// error is the descriptor's.
func saturate(ctx context.Context, ds []desc, batch []int, at time.Time) error {
	var checks []floodgate.Check
	var idx []int
	for _, i := range batch {
		if d := &ds[i]; d.r.upstream && d.over() && d.d.Remaining > 0 {
			checks = append(checks, floodgate.Check{Limiter: d.l.l, Key: d.key, N: d.d.Remaining})
			idx = append(idx, i)
		}
	}
	for range 4 {
		if len(checks) == 0 {
			return nil
		}
		var failed error
		rest, restIdx := checks[:0], idx[:0] // those still short, in place
		allowEachAt(ctx, at, checks, func(j int, d floodgate.Decision, err error) {
			switch {
			case failed != nil:
			case err != nil:
				ds[idx[j]].err, failed = err, err
			case (!d.Allowed || d.DryRun) && d.Remaining > 0:
				c := checks[j]
				c.N = d.Remaining
				rest, restIdx = append(rest, c), append(restIdx, idx[j])
			}
		})
		if failed != nil {
			return failed
		}
		checks, idx = rest, restIdx
	}
	return nil
}

// status sets m to a decided descriptor's status, and returns it. Shadow
// mode answers OK for an over descriptor of a rule in shadow_mode, and
// OVER_LIMIT for the others, which WithShadowMode lets through with the
// overall code alone.
func (d *desc) status(now int64, m *messages) *rlsv3.RateLimitResponse_DescriptorStatus {
	st := &m.status
	st.Code, st.CurrentLimit = rlsv3.RateLimitResponse_OK, d.r.current(&m.limit)
	m.reset.Seconds, st.DurationUntilReset = d.untilReset(now), &m.reset
	switch over := d.over(); {
	case over && !d.r.shadow:
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
	case !over:
		st.LimitRemaining = uint32(d.d.Remaining)
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
	case d.over() && d.d.RetryAfter != algo.Never:
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
