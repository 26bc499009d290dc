package algo

import "fmt"

// A Stamp says where the units of an admitted event sit in a key's State,
// so that Refund can take them back. StampOf gives it right after the
// admitting Decide; a store hands it to its caller, which returns it with
// the refund. Its fields are plain integers so that stores outside the
// process can carry it.
type Stamp struct {
	// At is the instant the units count from: the event's time, or for an
	// event decided after the clock stepped back, the later time at which
	// the State placed them (see Decide). An admitted event acts at At at
	// the earliest.
	At int64
	// TAT and Frac are, for token-bucket and leaky-bucket, the theoretical
	// arrival time after the event: TAT whole nanoseconds plus Frac/LIMIT.
	TAT, Frac int64
}

// StampOf returns the Stamp of the event that Decide has just admitted at
// now on s.
func (p *Policy) StampOf(s *State, now int64) Stamp {
	switch p.alg {
	case TokenBucket, LeakyBucket:
		return Stamp{At: now, TAT: s.t, Frac: s.x}
	case SlidingLog:
		if s.log != nil && s.log.len > 0 {
			return Stamp{At: max(now, s.log.at(s.log.len-1).t)}
		}
	case SlidingWindow, FixedWindow:
		return Stamp{At: max(now, s.t)}
	}
	return Stamp{At: now}
}

// Refund gives back, at time now, the n units of an event that was admitted
// with Stamp st and that its caller did not use (a cancelled reservation),
// as far as the events since then allow. The events admitted, less those
// refunded, never act beyond the policy, at the instants they were given;
// and s is never more permissive than if the event had not happened:
//
//   - token-bucket and leaky-bucket give back the part of the event's n*T
//     that has not drained by now, if no units were admitted after it (the
//     TAT it left is still the State's): the event was the last in the
//     queue. Otherwise nothing: the events after it were placed counting on
//     its units, and keep their instants, so the next event could act
//     beside them.
//   - fixed-window and sliding-window take n off the count of the window
//     that holds st.At, while the State still counts that window: the
//     events after it counted it, and still fit without it.
//   - sliding-log takes n units off the log entry at st.At while it is in
//     the log.
//
// A refund on a State of another algorithm, or one the State no longer
// holds, changes nothing. A negative n or time out of range is an error and
// changes nothing.
func (p *Policy) Refund(s *State, st Stamp, now, n int64) error {
	if err := p.CheckRefund(now, n); err != nil {
		return err
	}
	if s.alg != p.alg || n == 0 {
		return nil
	}
	switch p.alg {
	case TokenBucket, LeakyBucket:
		p.refundBucket(s, st, now, n)
	case FixedWindow:
		if st.At-st.At%p.period == s.t {
			s.x -= min(n, s.x)
		}
	case SlidingWindow:
		switch st.At - st.At%p.period {
		case s.t:
			s.x -= min(n, s.x)
		case s.t - p.period:
			s.y -= min(n, s.y)
		}
	case SlidingLog:
		if s.log != nil {
			s.log.take(st.At, n)
		}
	}
	return nil
}

// CheckRefund returns the error Refund returns, changing nothing, for a
// refund of n units at now that it cannot carry out: those of CheckEvent,
// and an error wrapping ErrInvalidCost for n above the burst, which no
// event can have been admitted with; nil otherwise.
func (p *Policy) CheckRefund(now, n int64) error {
	if err := p.CheckEvent(now, n); err != nil {
		return err
	}
	if n > p.burst {
		return fmt.Errorf("%w: refund of %d with burst %d", ErrInvalidCost, n, p.burst)
	}
	return nil
}

// refundBucket takes back the part of the event's span [TAT_r - n*T,
// TAT_r) still ahead of now, min(n*T, max(0, TAT_r - now)), when no units
// were reserved after the event (TAT <= TAT_r): TAT' = max(TAT - held,
// now). When some were (TAT > TAT_r), it takes back nothing: those later
// events were placed, and act, counting on the event's units, and TAT
// cannot tell how much of TAT - TAT_r they still need once other refunds
// have left gaps in it (x/time/rate's Reservation.CancelAt measures that
// from the last event's time, which a State does not keep). Units of
// 1/LIMIT ns, as in bucket.
func (p *Policy) refundBucket(s *State, st Stamp, now, n int64) {
	limit := uint64(p.limit)
	if st.Frac < 0 || uint64(st.Frac) >= limit || st.TAT < 0 {
		return
	}
	tl := mul64(uint64(now), limit)
	tatR := mul64(uint64(st.TAT), limit).add(u128{0, uint64(st.Frac)})
	tat := mul64(uint64(s.t), limit).add(u128{0, uint64(s.x)})
	if !tl.less(tatR) || tatR.less(tat) {
		return // the event's units have all drained, or others rely on them
	}
	held := tatR.sub(tl)
	if span := mul64(uint64(n), uint64(p.period)); span.less(held) {
		held = span
	}
	if !held.less(tat) { // tat <= held
		return
	}
	tat = tat.sub(held)
	if tat.less(tl) {
		tat = tl
	}
	t, f := tat.div64(limit)
	s.t, s.x = int64(t), int64(f)
}

// take removes up to n units from the entry at time t, dropping the entry
// when it empties.
func (r *ring) take(t, n int64) {
	for i := range r.len {
		e := r.at(i)
		if e.t != t {
			continue
		}
		k := min(n, e.n)
		r.units -= k
		if k < e.n {
			r.buf[(r.head+i)&(len(r.buf)-1)].n -= k
			return
		}
		for j := i; j+1 < r.len; j++ {
			r.buf[(r.head+j)&(len(r.buf)-1)] = r.at(j + 1)
		}
		r.len--
		return
	}
}

// Schedule decides an event that may wait: it admits the event at now if
// Decide would, and otherwise, if the event would be admitted after a wait
// of at most maxWait, admits it now for the time now+wait, holding its
// units from now on so that later events queue behind it. It returns the
// Decision (Allowed if admitted either way, with RetryAfter the wait) and
// the instant from which the caller may act.
//
// Only token-bucket and leaky-bucket schedule: their State is a time in
// the future, and units held for later delay later events exactly as they
// should. For the window and log algorithms, units placed in a later
// window would hide the present one's count, so Schedule admits them only
// at now and otherwise denies, like Decide.
func (p *Policy) Schedule(s *State, now, n int64, maxWait int64) (Decision, int64, error) {
	d, err := p.Decide(s, now, n)
	if err != nil || d.Allowed {
		return d, now, err
	}
	if (p.alg != TokenBucket && p.alg != LeakyBucket) || int64(d.RetryAfter) > maxWait || now > MaxTime-int64(d.RetryAfter) {
		return d, now, nil
	}
	wait := d.RetryAfter
	at := now + int64(wait)
	d, err = p.Decide(s, at, n)
	if err != nil || !d.Allowed {
		// Unreachable: RetryAfter always suffices.
		return d, now, fmt.Errorf("algo: scheduled event not admitted at now+%v", wait)
	}
	// Report from now: the event waits, and its units are held from now.
	d.RetryAfter, d.Remaining = wait, 0
	d.ResetAfter += wait
	return d, at, nil
}
