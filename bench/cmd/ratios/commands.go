package main

import (
	"fmt"
	"io"
	"slices"
)

// CommandUnits are the Redis commands a scenario's timed part cost
// (BenchmarkFloodRedis, BenchmarkFloodService), printed as medians beside
// each other rather than as ratios: a peer that answers from memory
// reaches nearly none.
var CommandUnits = []string{"redis-cmds/s", "cmds/key/retry"}

// printCommands writes, for each scenario in which a peer reports
// CommandUnits, every peer's medians of decisions/s, of CommandUnits and
// of admit/op, if there are any.
func printCommands(w io.Writer, s *Summary) {
	units := append([]string{"decisions/s"}, append(slices.Clone(CommandUnits), "admit/op")...)
	rows := [][]string{append([]string{"scenario", "peer"}, units...)}
	for _, sc := range s.Scenarios {
		for _, p := range s.Peers[sc] {
			if _, ok := s.Median(sc, p, CommandUnits[0]); !ok {
				continue
			}
			row := []string{sc, p}
			for _, u := range units {
				cell := "-"
				if v, ok := s.Median(sc, p, u); ok {
					cell = FormatValue(v)
				}
				row = append(row, cell)
			}
			rows = append(rows, row)
		}
	}
	if len(rows) == 1 {
		return
	}
	fmt.Fprintf(w, "\nRedis commands in the timed part, medians: as Redis counts them (INFO commandstats,\n"+
		"a script's own commands included), per second and per key per retry window (the longest a denial holds).\n\n")
	writeTable(w, rows, 2)
}
