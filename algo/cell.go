package algo

// Cell is a State in 16 bytes, for stores that keep many keys in memory:
// the whole state of a token-bucket, leaky-bucket, sliding-window or
// fixed-window key whose policy is Compact. A sliding-log key keeps a log,
// and a key of a larger LIMIT counts beyond 32 bits: neither has a Cell.
//
// A Cell does not record its algorithm, so it must always be used with
// policies of one algorithm. The zero Cell is the initial state.
type Cell struct {
	t    int64
	x, y uint32 // at most maxCell
}

// Cell returns s as a Cell, and false for a State that does not fit in
// one: a sliding log, or counts above 2^32-1. Every State of a Compact
// policy fits.
func (s *State) Cell() (Cell, bool) {
	if s.alg == SlidingLog || uint64(s.x)|uint64(s.y) > maxCell {
		return Cell{}, false
	}
	return Cell{t: s.t, x: uint32(s.x), y: uint32(s.y)}, true
}

// State returns c as a State of algorithm a.
func (c Cell) State(a Algorithm) State {
	return State{alg: a, t: c.t, x: int64(c.x), y: int64(c.y)}
}

// Clone returns a copy of s that shares nothing with it, so that a store can
// put s back as it was after deciding on it.
func (s *State) Clone() State {
	c := *s
	if s.log != nil {
		r := *s.log
		r.buf = append([]entry(nil), s.log.buf...)
		c.log = &r
	}
	return c
}
