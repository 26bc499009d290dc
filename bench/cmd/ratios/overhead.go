package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/floodgate/floodgate/bench"
)

// An Overhead is the overhead ratio (bench.OverheadRatio) of one
// middleware in one scenario of BenchmarkMiddleware.
type Overhead struct {
	Scenario, Peer string
	Ratio          float64 // (peer - bare) / (core - bare), in ns/op medians
}

// Overheads returns the overhead ratio of every middleware in each
// scenario that has the bare handler and floodgate's core
// (bench.MiddlewareBare, bench.MiddlewareCore), floodgate first: how many
// times what the least middleware adds to the handler each one adds.
func Overheads(s *Summary) []Overhead {
	var out []Overhead
	for _, sc := range s.Scenarios {
		bare, ok1 := s.Median(sc, bench.MiddlewareBare, "ns/op")
		core, ok2 := s.Median(sc, bench.MiddlewareCore, "ns/op")
		if !ok1 || !ok2 || core <= bare {
			continue
		}
		peers := slices.Clone(s.Peers[sc])
		if i := slices.Index(peers, bench.MiddlewareBase); i > 0 {
			peers = append(append([]string{bench.MiddlewareBase}, peers[:i]...), peers[i+1:]...)
		}
		for _, p := range peers {
			if p == bench.MiddlewareBare || p == bench.MiddlewareCore || p == bench.MiddlewareDecide {
				continue
			}
			if v, ok := s.Median(sc, p, "ns/op"); ok {
				out = append(out, Overhead{sc, p, bench.OverheadRatio(v, bare, core)})
			}
		}
	}
	return out
}

// printOverheads writes the overhead ratios, if there are any.
func printOverheads(w io.Writer, s *Summary) {
	var rows [][]string
	for _, o := range Overheads(s) {
		rows = append(rows, []string{o.Scenario, o.Peer, fmt.Sprintf("%.2f", o.Ratio)})
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nMiddleware overhead: (peer - %s) / (%s - %s) in ns/op; %s's target is at most 1.5.\n\n",
		bench.MiddlewareBare, bench.MiddlewareCore, bench.MiddlewareBare, bench.MiddlewareBase)
	writeTable(w, append([][]string{{"scenario", "peer", "overhead"}}, rows...), 2)
}
