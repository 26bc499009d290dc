package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/floodgate/floodgate/bench"
)

// An AboveClock is a peer's serial one-key median beside the median of its
// clock read (bench.ClockReads) in the same run: what it spends above the
// clock.
type AboveClock struct {
	Scenario, Peer, Clock string
	Median, Read          float64 // ns/op medians: the decision's, the clock read's
}

// Above returns what the peer spends above its clock read, in ns.
func (a AboveClock) Above() float64 { return a.Median - a.Read }

// AboveClocks returns what every peer with a known clock read spends above
// it in each serial one-key scenario, when the run measured that read
// (bench.ClockScenario).
func AboveClocks(s *Summary) []AboveClock {
	var out []AboveClock
	for _, sc := range s.Scenarios {
		if !strings.HasPrefix(sc, "OneKey/") || !strings.HasSuffix(sc, "/serial") {
			continue
		}
		for _, p := range s.Peers[sc] {
			clock, ok := bench.ClockReads[p]
			if !ok {
				continue
			}
			v, ok1 := s.Median(sc, p, "ns/op")
			read, ok2 := s.Median(bench.ClockScenario, clock, "ns/op")
			if ok1 && ok2 {
				out = append(out, AboveClock{sc, p, clock, v, read})
			}
		}
	}
	return out
}

// printAboveClocks writes AboveClocks, if there are any.
func printAboveClocks(w io.Writer, s *Summary) {
	rows := [][]string{{"scenario", "peer", "clock", "ns/op", "clock ns/op", "above the clock"}}
	for _, a := range AboveClocks(s) {
		rows = append(rows, []string{a.Scenario, a.Peer, a.Clock,
			FormatValue(a.Median), FormatValue(a.Read), FormatValue(a.Above())})
	}
	if len(rows) == 1 {
		return
	}
	fmt.Fprintf(w, "\nAbove the clock: each peer's serial one-key median less its clock read's (BenchmarkClock: "+
		"floodgate's default clock, or time.Now), in the same run.\n\n")
	writeTable(w, rows, 3)
}
