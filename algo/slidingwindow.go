package algo

import "time"

// slidingWindow estimates the units of the last PERIOD from two fixed
// windows: est = prev*(PERIOD-elapsed)/PERIOD + cur, where cur counts the
// window holding the event, prev the one before it, and elapsed is the time
// since the current window began. Every comparison is multiplied through by
// PERIOD so that est stays an exact fraction. s.t is the current window's
// start, s.x is cur and s.y is prev.
func (p *Policy) slidingWindow(s *State, now, n int64) Decision {
	period := p.period
	start := now - now%period
	at := now // the instant the estimate is taken
	var cur, prev int64
	switch {
	case start == s.t:
		cur, prev = s.x, s.y
	case start == s.t+period:
		prev = s.x
	case start < s.t: // the clock stepped back: the stored window's start
		start, at, cur, prev = s.t, s.t, s.x, s.y
	}
	// prev's weight times PERIOD: prev*(PERIOD-elapsed).
	weighted := mul64(uint64(prev), uint64(period-(at-start)))
	if n > 0 && !p.bp().less(weighted.add(mul64(uint64(cur+n), uint64(period)))) {
		s.t, s.x, s.y = start, cur+n, prev
		return Decision{Allowed: true,
			Remaining:  p.windowRemaining(cur+n, weighted),
			ResetAfter: time.Duration(start + 2*period - now)}
	}
	d := Decision{Allowed: n == 0, Remaining: p.windowRemaining(cur, weighted)}
	switch {
	case cur > 0:
		d.ResetAfter = time.Duration(start + 2*period - now)
	case prev > 0:
		d.ResetAfter = time.Duration(start + period - now)
	}
	if n > 0 {
		d.RetryAfter = time.Duration(p.slidingWindowAdmits(start, at, cur, prev, n) - now)
	}
	return d
}

// windowRemaining returns floor(LIMIT - est) = LIMIT - cur - ceil(weighted/PERIOD),
// at least 0.
func (p *Policy) windowRemaining(cur int64, weighted u128) int64 {
	return max(p.limit-cur-int64(weighted.ceilDiv64(uint64(p.period))), 0)
}

// slidingWindowAdmits returns the first instant, from at on, at which an
// event of cost n would be admitted if nothing else happened: the smallest
// elapsed time e with prev*(PERIOD-e) <= (LIMIT-n-cur)*PERIOD in the current
// window, else the same with cur as the previous window in the next one.
// Callers guarantee 0 < n <= LIMIT and that the event is denied at at.
func (p *Policy) slidingWindowAdmits(start, at, cur, prev, n int64) int64 {
	if room := p.limit - n - cur; room >= 0 && room < prev {
		if e := p.period - p.weightedRoom(room, prev); e < p.period {
			return max(start+e, at)
		}
	}
	var e int64
	if room := p.limit - n; room < cur {
		e = p.period - p.weightedRoom(room, cur)
	}
	return start + p.period + e
}

// weightedRoom returns floor(room*PERIOD/weight), for 0 <= room < weight:
// the most PERIOD-elapsed can be while weight*(PERIOD-elapsed) fits in
// room*PERIOD.
func (p *Policy) weightedRoom(room, weight int64) int64 {
	q, _ := mul64(uint64(room), uint64(p.period)).div64(uint64(weight))
	return int64(q)
}
