package algo

import "time"

// fixedWindow counts the units admitted in the window [k*PERIOD,
// (k+1)*PERIOD) that holds the event. s.t is that window's start, s.x its
// count.
func (p *Policy) fixedWindow(s *State, now, n int64) Decision {
	start := now - now%p.period
	var count int64
	switch {
	case start == s.t:
		count = s.x
	case start < s.t: // the clock stepped back: stay in the stored window
		start, count = s.t, s.x
	}
	untilEnd := time.Duration(start + p.period - now)
	if n > 0 && count+n <= p.limit {
		s.t, s.x = start, count+n
		return Decision{Allowed: true, Remaining: p.limit - count - n, ResetAfter: untilEnd}
	}
	d := Decision{Allowed: n == 0, Remaining: max(p.limit-count, 0)}
	if count > 0 {
		d.ResetAfter = untilEnd
	}
	if n > 0 {
		d.RetryAfter = untilEnd
	}
	return d
}
