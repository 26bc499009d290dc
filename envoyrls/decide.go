package envoyrls

import (
	"context"
	"errors"
	"time"

	"github.com/floodgate/floodgate/memstore"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/seconds"
	"github.com/floodgate/floodgate/store"
)

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
