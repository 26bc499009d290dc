package algo

// Shadow is what a store keeps, in 16 bytes, of the keys it had to forget
// before their state drained, so that a key that returns is no better off
// than when it was forgotten. Many keys may share one Shadow (a store hashes
// keys to a small table of them): it holds a state at least as strict as
// each of theirs, so sharing can only deny, never admit.
//
// "At least as strict" means, per algorithm, for every later event,
// including one whose time went backwards:
//
//   - token-bucket, leaky-bucket: the latest TAT (the fullest bucket);
//   - fixed-window: the latest window with the largest count;
//   - sliding-window: the latest window with the largest current and
//     previous counts, a state of an earlier window counting all its units
//     as the previous window's (capped at twice LIMIT, or 2^32-1 counts);
//   - sliding-log: all the units of the fullest log, as one entry at the
//     time of the newest entry of any of the logs, so each unit expires no
//     earlier than it did.
//
// A Shadow of a policy that is not Compact (a LIMIT above 2^32-1) still
// takes 16 bytes: its counts are rounded up to whole multiples of
// LIMIT/(2^32-1), rounded up, and a bucket's TAT up to a whole nanosecond,
// which can only make it stricter.
//
// The zero Shadow holds nothing. A Shadow must always be used with one
// Policy.
type Shadow struct{ c Cell }

// Forget adds s, the state of a key that a store drops at now, to *sh. A
// state drained at now adds nothing, and a Shadow drained at now is
// cleared first.
func (p *Policy) Forget(sh *Shadow, s *State, now int64) {
	if s.alg != p.alg || p.ResetAt(s) <= now {
		return
	}
	c := p.shadowCell(s)
	if p.shadowResetAt(sh.c) <= now {
		sh.c = c
		return
	}
	sh.c = p.join(sh.c, c)
}

// Recall returns the state a key missing from the store starts from at
// now: the zero State when sh holds nothing undrained at now, else a State
// at least as strict as that of every key forgotten in sh. Recall does not
// allocate, except for a sliding log's entry.
func (p *Policy) Recall(sh Shadow, now int64) State {
	if p.shadowResetAt(sh.c) <= now {
		return State{}
	}
	q := p.shadowUnit()
	if p.alg != SlidingLog {
		s := sh.c.State(p.alg)
		if q > 1 {
			s.x, s.y = min(s.x*q, p.limit), s.y*q
		}
		return s
	}
	s := State{alg: SlidingLog, log: &ring{}}
	s.log.push(sh.c.t, min(int64(sh.c.x)*q, p.limit))
	return s
}

// Looser reports whether a key recalled from a at now is likely denied
// less often than one recalled from b: a has drained at now and b has
// not, or a drains first, or both drain together and a holds fewer units.
// Either is safe to recall from when each is at least as strict as the
// key's forgotten state; Looser only picks the one that denies less.
func (p *Policy) Looser(a, b Shadow, now int64) bool {
	ra, ua := p.shadowLoad(a, now)
	rb, ub := p.shadowLoad(b, now)
	return ra < rb || ra == rb && ua < ub
}

// shadowLoad returns when sh drains and the counts it holds, both 0 if
// it has drained at now.
func (p *Policy) shadowLoad(sh Shadow, now int64) (int64, uint64) {
	r := p.shadowResetAt(sh.c)
	if r <= now {
		return 0, 0
	}
	return r, uint64(sh.c.x) + uint64(sh.c.y)
}

// shadowUnit returns how many units one count of a Shadow's Cell stands
// for: 1 for a LIMIT that fits in a Cell, else LIMIT/(2^32-1) rounded up.
func (p *Policy) shadowUnit() int64 {
	if p.limit <= maxCell {
		return 1
	}
	return (p.limit + maxCell - 1) / maxCell
}

// shadowCount returns n units as a Shadow's count, rounded up.
func shadowCount(n, q int64) uint32 { return uint32(min((n+q-1)/q, maxCell)) }

// shadowCell returns s as a Shadow's Cell: its own for a Compact policy;
// for sliding-log, the time of its newest entry and its units; for a
// larger LIMIT, its counts in shadowUnit and a bucket's TAT in whole ns.
func (p *Policy) shadowCell(s *State) Cell {
	q := p.shadowUnit()
	switch {
	case p.alg == SlidingLog:
		r := s.log
		return Cell{t: r.at(r.len - 1).t, x: shadowCount(min(r.units, p.limit), q)}
	case q == 1:
		c, _ := s.Cell()
		return c
	case p.alg.isBucket() && s.x > 0:
		return Cell{t: s.t + 1}
	case p.alg.isBucket():
		return Cell{t: s.t}
	}
	return Cell{t: s.t, x: shadowCount(s.x, q), y: shadowCount(s.y, q)}
}

// shadowResetAt is ResetAt of the state c stands for.
func (p *Policy) shadowResetAt(c Cell) int64 {
	if p.alg == SlidingLog {
		if c.x == 0 {
			return 0
		}
		return c.t + p.period
	}
	s := c.State(p.alg)
	return p.ResetAt(&s)
}

// join returns a Cell at least as strict as a and b (see Shadow).
func (p *Policy) join(a, b Cell) Cell {
	switch p.alg {
	case TokenBucket, LeakyBucket:
		if a.t > b.t || a.t == b.t && a.x > b.x {
			return a
		}
		return b
	case SlidingWindow:
		t := max(a.t, b.t)
		a, b = p.toWindow(a, t), p.toWindow(b, t)
		return Cell{t: t, x: max(a.x, b.x), y: max(a.y, b.y)}
	default: // fixed-window, sliding-log
		return Cell{t: max(a.t, b.t), x: max(a.x, b.x)}
	}
}

// toWindow returns sliding-window state c moved to the later window t, its
// units all counted as the previous window's.
func (p *Policy) toWindow(c Cell, t int64) Cell {
	if c.t == t {
		return c
	}
	most := min(2*uint64(shadowCount(p.limit, p.shadowUnit())), maxCell)
	prev := min(uint64(c.x)+uint64(c.y), most)
	return Cell{t: t, y: uint32(prev)}
}
