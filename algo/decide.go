package algo

import "fmt"

// Decide decides one event of cost n at time now (nanoseconds since the
// caller's origin, 0 <= now <= MaxTime) for the key whose state is *s, and
// advances *s to the state after the event. It never reads a clock.
//
//   - An admitted event with n > 0 updates *s; a denied event and a peek
//     (n == 0, always admitted) leave *s exactly as it was.
//   - n greater than p.Burst() is denied with RetryAfter Never and an
//     error wrapping ErrCostExceedsBurst; Remaining and ResetAfter are
//     those of a peek.
//   - A negative n, a time out of range or the zero Policy is an error
//     (ErrInvalidCost, ErrInvalidTime, ErrInvalidPolicy) with a zero
//     Decision, and *s is untouched.
//   - A State written under another algorithm counts as the initial state.
//   - Time going backwards is not an error, and never admits more than
//     the policy allows: sliding-log decides an event earlier than its
//     newest entry at that entry's time; the window algorithms decide an
//     event from an earlier window in the stored window (fixed-window as
//     if in it, sliding-window at its start); token-bucket and
//     leaky-bucket need no rule, since their state is a time in the future
//     and an earlier t only makes an event wait longer. Within a window,
//     sliding-window decides at the event's own time, which is stricter.
//     Durations in the Decision are always measured from now.
//
// Decide does not allocate, except when a sliding log grows. It is not safe
// for concurrent use on one State when a call may admit; a store
// serializes access per key. A denial and a peek write no memory: not *s,
// nor what *s refers to (a sliding log's entries). So denials and peeks
// may run concurrently on one State, and on copies of it (s2 := *s, which
// share a sliding log's entries); redisstore's deny cache relies on it.
func (p *Policy) Decide(s *State, now, n int64) (Decision, error) {
	if err := p.CheckEvent(now, n); err != nil {
		return Decision{}, err
	}
	if s.alg != p.alg {
		// Decide from the initial state. A peek or a never-admissible event
		// must leave *s alone; any other event is admitted from the initial
		// state (n <= burst fits an empty bucket, window or log), so *s is
		// overwritten either way.
		if n == 0 || n > p.burst {
			s = &State{}
		} else {
			*s = State{}
		}
		s.alg = p.alg
	}
	if n > p.burst {
		d := p.decide(s, now, 0)
		d.Allowed, d.RetryAfter = false, Never
		return d, fmt.Errorf("%w: cost %d, burst %d", ErrCostExceedsBurst, n, p.burst)
	}
	return p.decide(s, now, n), nil
}

// CheckEvent returns the error Decide returns, changing nothing, for an
// event of cost n at now that it cannot decide: an error wrapping
// ErrInvalidPolicy for the zero Policy, ErrInvalidTime for a time outside
// [0, MaxTime], ErrInvalidCost for a negative cost; nil otherwise. A cost
// above the burst is not an error here: Decide denies it. Stores call it to
// refuse bad input before they change anything.
func (p *Policy) CheckEvent(now, n int64) error {
	if p.alg != 0 && uint64(now) <= MaxTime && n >= 0 {
		return nil // the common case, inlined into Decide
	}
	return p.eventError(now, n)
}

// eventError is CheckEvent's error.
func (p *Policy) eventError(now, n int64) error {
	switch {
	case p.alg == 0:
		return fmt.Errorf("%w: the zero Policy", ErrInvalidPolicy)
	case now < 0 || now > MaxTime:
		return fmt.Errorf("%w: %d ns is outside [0, %d]", ErrInvalidTime, now, int64(MaxTime))
	case n < 0:
		return fmt.Errorf("%w: %d", ErrInvalidCost, n)
	}
	return nil
}

func (p *Policy) decide(s *State, now, n int64) Decision {
	switch p.alg {
	case TokenBucket, LeakyBucket:
		return p.bucket(s, now, n)
	case SlidingLog:
		return p.slidingLog(s, now, n)
	case SlidingWindow:
		return p.slidingWindow(s, now, n)
	default:
		return p.fixedWindow(s, now, n)
	}
}

// ResetAt returns the instant from which s decides exactly as the initial
// State would (a store may drop s then without changing any decision), or 0
// when s is the initial state already. Like Decision.ResetAfter it is
// measured in the time of Decide, not read from a clock.
func (p *Policy) ResetAt(s *State) int64 {
	if s.alg != p.alg {
		return 0
	}
	switch p.alg {
	case TokenBucket, LeakyBucket:
		if s.x > 0 {
			return s.t + 1
		}
		return s.t
	case SlidingLog:
		if s.log == nil || s.log.len == 0 {
			return 0
		}
		return s.log.at(s.log.len-1).t + p.period
	case SlidingWindow:
		switch {
		case s.x > 0:
			return s.t + 2*p.period
		case s.y > 0:
			return s.t + p.period
		}
	case FixedWindow:
		if s.x > 0 {
			return s.t + p.period
		}
	}
	return 0
}
