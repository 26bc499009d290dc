package main

import (
	"fmt"
	"io"
)

// CostUnits are what a decision costs, as redistest.Usage.Report reports
// them: Redis's CPU time (summed over a Cluster's masters), commands and
// bytes in and out, and the benchmark process's CPU time.
var CostUnits = []string{"redis-µs/op", "redis-cmds/op", "redis-bytes/op", "cpu-ns/op"}

// printCosts writes, for each scenario in which a peer reports
// redis-µs/op, every peer's medians of decisions/s and CostUnits, and for
// each peer but base, base's median divided by the peer's in decisions/s
// and Redis µs: a table only if there is such a scenario.
func printCosts(w io.Writer, s *Summary, base string) {
	units := append([]string{"decisions/s"}, CostUnits...)
	head := append([]string{"scenario", "peer"}, units...)
	rows := [][]string{append(head, base+"/peer decisions/s", base+"/peer redis-µs")}
	for _, sc := range s.Scenarios {
		for _, p := range s.Peers[sc] {
			if _, ok := s.Median(sc, p, CostUnits[0]); !ok {
				continue
			}
			row := []string{sc, p}
			for _, u := range units {
				row = append(row, median(s, sc, p, u))
			}
			rows = append(rows, append(row, costRatio(s, sc, base, p, "decisions/s"), costRatio(s, sc, base, p, CostUnits[0])))
		}
	}
	if len(rows) == 1 {
		return
	}
	fmt.Fprintf(w, "\nWhat a decision costs, medians: Redis CPU (µs; one Redis core decides at most 1,000,000 / redis-µs a second),\n"+
		"Redis commands (a script's own included) and bytes in and out per decision, and the benchmark process's CPU (ns)\n"+
		"per decision; then %s's median divided by the peer's: above 1, %s decides more per second or costs Redis more.\n\n", base, base)
	writeTable(w, rows, 2)
}

// median returns the median of peer's unit in scenario, formatted, or "-".
func median(s *Summary, scenario, peer, unit string) string {
	if v, ok := s.Median(scenario, peer, unit); ok {
		return FormatValue(v)
	}
	return "-"
}

// costRatio returns base's median of unit in scenario divided by peer's,
// or "-" for base itself or when either is missing or the peer's is 0.
func costRatio(s *Summary, scenario, base, peer, unit string) string {
	if peer == base {
		return "-"
	}
	b, ok1 := s.Median(scenario, base, unit)
	p, ok2 := s.Median(scenario, peer, unit)
	if !ok1 || !ok2 || p == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", b/p)
}
