package algo

// Cell is a State in 16 bytes, for stores that keep many keys in memory:
// the whole state of a token-bucket, leaky-bucket, sliding-window or
// fixed-window key. A sliding-log key keeps a log and has no Cell.
//
// A Cell does not record its algorithm, so it must always be used with
// policies of one algorithm. The zero Cell is the initial state.
type Cell struct {
	t    int64
	x, y uint32 // at most MaxLimit, which fits in 32 bits
}

// Cell returns s as a Cell, and false for a sliding-log State, which does
// not fit in one.
func (s *State) Cell() (Cell, bool) {
	if s.alg == SlidingLog {
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
