package algo

import "time"

// bucket decides for token-bucket and leaky-bucket, which are one algorithm
// seen two ways: GCRA's theoretical arrival time TAT is the instant a meter
// draining LIMIT per PERIOD would be empty, so a meter holding level units
// has TAT = t + level*T, and "level + n <= C" is "max(TAT, t) + n*T - t <=
// C*T". Both are computed here in units of 1/LIMIT nanoseconds, where the
// emission interval T = PERIOD/LIMIT is exactly PERIOD units.
func (p *Policy) bucket(s *State, now, n int64) Decision {
	if p.tick != 0 && s.x == 0 {
		return p.bucketTick(&s.t, now, n)
	}
	limit := uint64(p.limit)
	frac := uint64(s.x)
	if frac >= limit { // written under a larger limit
		frac = limit - 1
	}
	tl := mul64(uint64(now), limit)
	tat := mul64(uint64(s.t), limit).add(u128{0, frac})
	var wait u128 // TAT - t, or 0 when the bucket is full
	if tl.less(tat) {
		wait = tat.sub(tl)
	}
	after := wait.add(mul64(uint64(n), uint64(p.period))) // TAT' - t if admitted
	if n > 0 && !p.bp().less(after) {
		t, f := tl.add(after).div64(limit)
		s.t, s.x = int64(t), int64(f)
		return Decision{Allowed: true, Remaining: p.bucketRemaining(after), ResetAfter: p.bucketDuration(after)}
	}
	d := Decision{Allowed: n == 0, Remaining: p.bucketRemaining(wait), ResetAfter: p.bucketDuration(wait)}
	if n > 0 {
		d.RetryAfter = p.bucketDuration(after.sub(p.bp()))
	}
	return d
}

// bucketRemaining returns floor((tau - wait)/T), at least 0.
func (p *Policy) bucketRemaining(wait u128) int64 {
	if p.bp().less(wait) {
		return 0 // possible only after the clock stepped back
	}
	q, _ := p.bp().sub(wait).div64(uint64(p.period))
	return int64(q)
}

// bucketDuration converts x units of 1/LIMIT ns to nanoseconds, rounded up.
func (p *Policy) bucketDuration(x u128) time.Duration {
	return time.Duration(x.ceilDiv64(uint64(p.limit)))
}

// bucketTick is bucket for a policy whose T is a whole number of
// nanoseconds (p.tick) and a TAT *tat with no fraction, which every event
// then keeps: every quantity of bucket is a multiple of LIMIT units, so it
// computes them in whole nanoseconds, in 64 bits, with the same results.
// TAT - t is below MaxTime+MaxDrain and n*T at most MaxDrain, so no sum
// overflows a uint64.
func (p *Policy) bucketTick(tat *int64, now, n int64) Decision {
	tau := uint64(p.burst) * uint64(p.tick) // at most MaxDrain
	var wait uint64                         // TAT - t, or 0 when the bucket is full
	if *tat > now {
		wait = uint64(*tat - now)
	}
	after := wait + uint64(n)*uint64(p.tick) // TAT' - t if admitted
	if n > 0 && after <= tau {
		*tat = now + int64(after)
		return Decision{Allowed: true, Remaining: int64((tau - after) / uint64(p.tick)), ResetAfter: time.Duration(after)}
	}
	d := Decision{Allowed: n == 0, ResetAfter: time.Duration(wait)}
	if wait <= tau {
		d.Remaining = int64((tau - wait) / uint64(p.tick))
	}
	if n > 0 {
		d.RetryAfter = time.Duration(after - tau)
	}
	return d
}
