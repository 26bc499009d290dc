package algo

import "fmt"

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

// MakeCell returns the Cell whose integers are t, x and y, as Parts
// returned them, for a store that keeps them apart. Only sliding-window
// reads y (its previous window): a store may drop it for the others.
func MakeCell(t int64, x, y uint32) Cell { return Cell{t: t, x: x, y: y} }

// Parts returns the integers of c (see MakeCell).
func (c Cell) Parts() (t int64, x, y uint32) { return c.t, c.x, c.y }

// State returns c as a State of algorithm a.
func (c Cell) State(a Algorithm) State {
	return State{alg: a, t: c.t, x: int64(c.x), y: int64(c.y)}
}

// DecideCell is Decide on the State that c holds under p, a Compact
// policy, which it writes back to c: the same Decision and the same State
// after it. An event of a bucket whose T is a whole number of nanoseconds
// is decided on c in place. A policy that is not Compact is an error
// wrapping ErrInvalidPolicy, and c is untouched.
func (p *Policy) DecideCell(c *Cell, now, n int64) (Decision, error) {
	if c.x == 0 {
		if d, tat, ok := p.DecideTAT(c.t, now, n); ok {
			c.t = tat
			return d, nil
		}
	}
	if !p.IsZero() && !p.Compact() {
		return Decision{}, fmt.Errorf("%w: %v has no Cell", ErrInvalidPolicy, p)
	}
	s := c.State(p.alg)
	d, err := p.Decide(&s, now, n)
	*c, _ = s.Cell()
	return d, err
}

// DecideTAT is DecideCell on a Cell of a token or leaky bucket that holds
// the TAT tat and no fraction, for the events it decides in 64 bits: p's T
// is a whole number of nanoseconds (every event then keeps the Cell's
// fraction 0) and 0 < n <= p.Burst(), at a valid time. It returns the
// Decision, the TAT after the event (tat when denied) and true; or false
// for any other event or policy, which DecideCell decides. A store may so
// keep such a Cell in one word and update it with a compare-and-swap.
func (p *Policy) DecideTAT(tat, now, n int64) (Decision, int64, bool) {
	if p.tick == 0 || n <= 0 || n > p.burst || uint64(now) > MaxTime {
		return Decision{}, tat, false
	}
	d := p.bucketTick(&tat, now, n)
	return d, tat, true
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
