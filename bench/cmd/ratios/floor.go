package main

import (
	"fmt"
	"io"

	"github.com/floodgate/floodgate/bench"
)

// FloorReference is the peer the floor is compared with: issue 19 set its
// goals for the memory store against x/time/rate's time.
const FloorReference = "xrate"

// A Floor is, in one scenario, the median of the floor (the bench
// pseudo-peer that does the least work of any exact keyed limiter,
// bench.Peer.Floor) beside FloorReference's and base's medians, in ns/op;
// Ref or Base is 0 when that peer did not run there.
type Floor struct {
	Scenario, Peer    string
	Median, Ref, Base float64
}

// Floors returns the floor of every scenario in which a floor peer of
// bench.Peers reported ns/op.
func Floors(s *Summary, base string) []Floor {
	var out []Floor
	for _, p := range bench.Peers {
		if !p.Floor {
			continue
		}
		for _, sc := range s.Scenarios {
			v, ok := s.Median(sc, p.Name, "ns/op")
			if !ok {
				continue
			}
			ref, _ := s.Median(sc, FloorReference, "ns/op")
			b, _ := s.Median(sc, base, "ns/op")
			out = append(out, Floor{sc, p.Name, v, ref, b})
		}
	}
	return out
}

// Line returns f as one line: "Keys1M/serial: floor 440 ns = 0.69x
// xrate; floodgate 405 ns = 0.92x the floor (-35 ns)", less the parts of
// the peers that did not run.
func (f Floor) Line(base string) string {
	line := fmt.Sprintf("%s: %s %s ns", f.Scenario, f.Peer, FormatValue(f.Median))
	if f.Ref > 0 {
		line += fmt.Sprintf(" = %.2fx %s", f.Median/f.Ref, FloorReference)
	}
	if f.Base > 0 {
		sign := ""
		if f.Base >= f.Median {
			sign = "+"
		}
		line += fmt.Sprintf("; %s %s ns = %.2fx the floor (%s%s ns)",
			base, FormatValue(f.Base), f.Base/f.Median, sign, FormatValue(f.Base-f.Median))
	}
	return line
}

// printFloors writes Floors, if there are any.
func printFloors(w io.Writer, s *Summary, base string) {
	floors := Floors(s, base)
	if len(floors) == 0 {
		return
	}
	fmt.Fprintf(w, "\nThe floor: the least work of any exact keyed limiter (a clock read, a hash, a CAS on one word; "+
		"not a limiter), in ns/op medians, beside %s's and %s's.\n\n", FloorReference, base)
	for _, f := range floors {
		fmt.Fprintf(w, "  %s\n", f.Line(base))
	}
}
