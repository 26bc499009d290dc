package algo

// Convert returns the state under p of a key whose state under the policy
// from is *s at now: what a key's spent units become when its limiter keeps
// its name and changes its policy (a deploy that raises 100/h to 200/h). It
// reads *s and never changes it. The rules, from the exact to the general:
//
//   - an equal policy keeps the state;
//   - token-bucket and leaky-bucket of one LIMIT and PERIOD keep the TAT,
//     brought down to a full bucket of p's burst when that is smaller;
//   - sliding-log to sliding-log keeps the log, or, when it holds more
//     units than p's LIMIT, one full entry at the time of its newest;
//   - fixed-window to fixed-window, or sliding-window to sliding-window, of
//     one PERIOD keeps the windows, each count capped at p's LIMIT;
//   - any other change spends at now, under p, the units that s still
//     counts at now (from's Burst less the Remaining of a peek), capped at
//     p's Burst: a bucket's level rounded up, a window's count or estimate
//     rounded up, a log's units.
//
// So the units a key spent stay spent: a raise gives the new headroom at
// once (100 spent of 100/h leave 100 of 200/h), a cut takes effect at once.
// Each rule is conservative: the state it returns is at least as strict as
// p's own state after the units s counts, each spent no earlier than it
// could have been, since every algorithm counts a unit at least as long
// when it is spent later, and capping at p's Burst is the fullest any
// state of p can be. What s no longer counts (the units of a window that
// has ended, a drained bucket's) is gone: no rule can bring it back.
//
// A State of another algorithm than from's counts as the initial state, as
// in Decide, and converts to it. A time outside [0, MaxTime] or a zero
// Policy is an error, as in Decide, with the zero State.
func (p *Policy) Convert(from *Policy, s *State, now int64) (State, error) {
	if err := from.CheckEvent(now, 0); err != nil {
		return State{}, err
	}
	if err := p.CheckEvent(now, 0); err != nil {
		return State{}, err
	}
	switch {
	case s.alg != from.alg:
		return State{}, nil
	case *p == *from:
		return s.Clone(), nil
	case p.alg.isBucket() && from.alg.isBucket() && p.limit == from.limit && p.period == from.period:
		return p.convertTAT(s, now), nil
	case p.alg == SlidingLog && from.alg == SlidingLog:
		return p.convertLog(s), nil
	case p.alg == from.alg && !p.alg.isBucket() && p.period == from.period: // the windows
		return State{alg: p.alg, t: s.t, x: min(s.x, p.limit), y: min(s.y, p.limit)}, nil
	}
	return p.spentAt(now, from.burst-from.peek(s, now).Remaining), nil
}

// peek returns the Decision of an event of cost 0 at now on s, which
// leaves s as it is.
func (p *Policy) peek(s *State, now int64) Decision {
	if s.alg != p.alg {
		return p.decide(&State{alg: p.alg}, now, 0)
	}
	return p.decide(s, now, 0)
}

// spentAt returns p's state after n units spent at now from the initial
// state, n capped at p's burst (a full bucket, window or log).
func (p *Policy) spentAt(now, n int64) State {
	c := State{alg: p.alg}
	if n > 0 {
		p.decide(&c, now, min(n, p.burst)) // admitted: it fits the initial state
	}
	return c
}

// convertTAT returns s, a bucket's TAT under a policy of p's LIMIT and
// PERIOD, as p's state: the same TAT, or a full bucket of p's burst at now
// when the TAT is further than p's tau.
func (p *Policy) convertTAT(s *State, now int64) State {
	limit := uint64(p.limit)
	tat := mul64(uint64(s.t), limit).add(u128{0, uint64(s.x)})
	if mul64(uint64(now), limit).add(p.bp()).less(tat) {
		return p.spentAt(now, p.burst)
	}
	return State{alg: p.alg, t: s.t, x: s.x}
}

// convertLog returns s, a sliding log, as p's state: the same entries, or
// when they hold more units than p's LIMIT one entry of LIMIT units at the
// time of the newest.
func (p *Policy) convertLog(s *State) State {
	r := s.log
	if r == nil || r.len == 0 {
		return State{}
	}
	if r.units <= p.limit {
		return s.Clone()
	}
	c := State{alg: SlidingLog, log: &ring{}}
	c.log.push(r.at(r.len-1).t, p.limit)
	return c
}
