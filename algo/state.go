package algo

import (
	"encoding/binary"
	"fmt"
)

// State is one key's state under one Policy. The zero State is the initial
// state: a full bucket, an empty window or log. Only Decide changes it.
//
// A State is a few integers, plus for sliding-log a ring of at most LIMIT
// entries. It is not safe for concurrent use. MarshalBinary and
// UnmarshalBinary convert it to and from a compact, versioned encoding for
// stores that keep state outside the process.
type State struct {
	alg Algorithm
	t   int64 // buckets: TAT in whole ns; windows: start of the current window
	x   int64 // buckets: TAT's fraction, in 1/limit ns; windows: units in the current window
	y   int64 // sliding-window: units in the previous window
	log *ring // sliding-log: the admitted units of the last PERIOD
}

// stateVersion is the first byte of every encoding; change it when the
// layout changes.
const stateVersion = 1

// AppendBinary implements encoding.BinaryAppender: a version byte, the
// algorithm, then varints (for sliding-log the entries, each as the gap from
// the previous one and its units).
func (s *State) AppendBinary(b []byte) ([]byte, error) {
	b = append(b, stateVersion, byte(s.alg))
	if s.alg == SlidingLog {
		var n int
		if s.log != nil {
			n = s.log.len
		}
		b = binary.AppendUvarint(b, uint64(n))
		var prev int64
		for i := range n {
			e := s.log.at(i)
			b = binary.AppendUvarint(b, uint64(e.t-prev))
			b = binary.AppendUvarint(b, uint64(e.n))
			prev = e.t
		}
		return b, nil
	}
	for _, v := range [...]int64{s.t, s.x, s.y} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	return b, nil
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (s *State) MarshalBinary() ([]byte, error) { return s.AppendBinary(nil) }

// UnmarshalBinary implements encoding.BinaryUnmarshaler. It rejects, with
// an error wrapping ErrInvalidState and leaving s unchanged, anything that
// AppendBinary could not have written from a State that Decide produced.
func (s *State) UnmarshalBinary(b []byte) error {
	var d decoder
	d.b = b
	var out State
	if v := d.byte(); v != stateVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrInvalidState, v, stateVersion)
	}
	out.alg = Algorithm(d.byte())
	switch {
	case out.alg == SlidingLog:
		n := d.uvarint(MaxLimit)
		if n > uint64(len(d.b)/2) { // each entry takes at least two bytes
			d.fail(fmt.Sprintf("%d log entries in %d bytes", n, len(d.b)))
		} else if n > 0 {
			out.log = &ring{}
		}
		var t int64
		for i := uint64(0); i < n && d.err == ""; i++ {
			gap := int64(d.uvarint(MaxTime - uint64(t)))
			units := int64(d.uvarint(MaxLimit))
			if units == 0 || gap == 0 && i > 0 {
				d.fail("an empty or out-of-order log entry")
				break
			}
			t += gap
			out.log.push(t, units)
		}
	case out.alg == 0 || out.alg.valid():
		out.t = int64(d.uvarint(MaxTime + uint64(MaxDrain)))
		out.x = int64(d.uvarint(MaxLimit))
		out.y = int64(d.uvarint(2 * MaxLimit)) // a Shadow's previous window
	default:
		d.fail(fmt.Sprintf("unknown algorithm %d", out.alg))
	}
	if d.err == "" && len(d.b) > 0 {
		d.fail(fmt.Sprintf("%d bytes after the end", len(d.b)))
	}
	if d.err != "" {
		return fmt.Errorf("%w: %s", ErrInvalidState, d.err)
	}
	*s = out
	return nil
}

// decoder reads an encoded State, remembering the first problem.
type decoder struct {
	b   []byte
	err string
}

func (d *decoder) fail(problem string) {
	if d.err == "" {
		d.err = problem
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint(max uint64) uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong number")
		return 0
	}
	d.b = d.b[n:]
	if v > max {
		d.fail(fmt.Sprintf("number %d is more than %d", v, max))
		return 0
	}
	return v
}
