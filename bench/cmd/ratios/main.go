// Command ratios summarises the output of the bench module's benchmarks:
// for each scenario, the ratio of floodgate's median to each peer's, in
// ns/op and (for BenchmarkMemory) B/key, beside the fraction of calls each
// admitted. Below 1, floodgate is faster or holds less memory. Scenarios
// that report a rate (BenchmarkRedis's decisions/s) are compared in that
// rate alone, in a table of their own: there, above 1, floodgate decides
// more per second. What a decision costs Redis and the benchmark process
// (redis-µs/op, redis-cmds/op, redis-bytes/op, cpu-ns/op) is listed peer
// by peer beside decisions/s, with floodgate's figures divided by each
// peer's; so are the flood scenarios' Redis commands per second and per
// key (redis-cmds/s, cmds/key/retry).
//
// Usage:
//
//	go run ./cmd/ratios [-base floodgate] [file ...]
//
// It reads bench.txt when given no file, and standard input for "-".
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/floodgate/floodgate/bench"
)

func main() {
	base := flag.String("base", "floodgate", "the peer whose figures are divided by each other peer's")
	flag.Parse()
	files := flag.Args()
	if len(files) == 0 {
		files = []string{"bench.txt"}
	}
	results, err := parseFiles(files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratios:", err)
		os.Exit(1)
	}
	Print(os.Stdout, Summarise(results), *base, peerNotes())
}

// parseFiles returns the results in the files, "-" standing for standard
// input; none is an error.
func parseFiles(files []string) ([]Result, error) {
	var results []Result
	for _, name := range files {
		rs, err := parseFile(name)
		if err != nil {
			return nil, err
		}
		results = append(results, rs...)
	}
	if len(results) == 0 {
		return nil, errors.New("no benchmark results in " + strings.Join(files, ", "))
	}
	return results, nil
}

// peerNotes returns the note of each peer of the bench module, by name. A
// peer listed again for Redis without a note there keeps the note it has
// elsewhere.
func peerNotes() map[string]string {
	notes := make(map[string]string)
	for _, p := range bench.Peers {
		notes[p.Name] = p.Note
	}
	for _, p := range bench.RedisPeers {
		if p.Note != "" {
			notes[p.Name] = p.Note
		}
	}
	for _, p := range bench.MiddlewarePeers {
		notes[p.Name] = p.Note
	}
	for _, p := range bench.ServicePeers {
		notes[p.Name] = p.Note
	}
	for _, p := range bench.ServiceRedisPeers {
		if p.Note != "" {
			notes[p.Name] = p.Note
		}
	}
	for _, p := range bench.FloodRedisPeers {
		if p.Note != "" {
			notes[p.Name] = p.Note
		}
	}
	for _, p := range bench.FloodServicePeers {
		if p.Note != "" {
			notes[p.Name] = p.Note
		}
	}
	for _, p := range bench.DelayedPeers {
		notes[p.Name] = p.Note
	}
	maps.Copy(notes, bench.OtherModulePeers)
	return notes
}

func parseFile(name string) ([]Result, error) {
	if name == "-" {
		return Parse(os.Stdin)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Units are the units compared where less is better, in order:
// BenchmarkDelayed reports B/waiting, the bytes a waiting request holds.
var Units = []string{"ns/op", "B/key", "B/waiting"}

// RateUnits are the units compared where more is better, in order. A
// scenario in which the base reports one is compared in these alone: its
// ns/op is only the inverse.
var RateUnits = []string{"decisions/s"}

// LatencyUnits are the latency percentiles compared, less being better,
// in the scenarios that report them (BenchmarkService's p99-µs).
var LatencyUnits = []string{"p99-µs"}

// reportsRate reports whether peer reports one of RateUnits in scenario.
func reportsRate(s *Summary, scenario, peer string) bool {
	for _, u := range RateUnits {
		if _, ok := s.Median(scenario, peer, u); ok {
			return true
		}
	}
	return false
}

// Print writes the ratio table, base's own medians and the notes: each
// peer's note from notes, and a warning for each peer whose admitted
// fraction contradicts its scenario's name or that reported errors.
func Print(w io.Writer, s *Summary, base string, notes map[string]string) {
	fmt.Fprintf(w, "admit/op: the fraction of calls admitted (median); ! marks one that contradicts the scenario's name.\n")
	printRatios(w, s, base)
	printCosts(w, s, base)
	printCommands(w, s)
	printOverheads(w, s)
	printAboveClocks(w, s)
	printFloors(w, s, base)
	printMedians(w, s, base)
	peers, warnings := peersAndWarnings(s)
	fmt.Fprintf(w, "\nPeers\n")
	for _, p := range peers {
		if notes[p] != "" {
			fmt.Fprintf(w, "  %-12s %s\n", p, notes[p])
		}
	}
	if len(warnings) > 0 {
		fmt.Fprintf(w, "\nWarnings\n")
		for _, m := range warnings {
			fmt.Fprintf(w, "  %s\n", m)
		}
	}
}

// printRatios writes the tables of ratios of base's medians to each
// peer's: in Units, for the scenarios in which base reports no rate; in
// RateUnits; and in LatencyUnits. A table without rows is left out.
func printRatios(w io.Writer, s *Summary, base string) {
	var costs []Ratio
	for _, r := range s.Ratios(base, Units) {
		if !reportsRate(s, r.Scenario, base) && r.Scenario != bench.ClockScenario {
			costs = append(costs, r)
		}
	}
	if len(costs) > 0 {
		fmt.Fprintf(w, "\n%s / peer: ratio of the medians over the runs (n); below 1, %s is faster or holds less memory.\n\n", base, base)
		writeRatios(w, s, base, costs)
	}
	if rates := s.Ratios(base, RateUnits); len(rates) > 0 {
		fmt.Fprintf(w, "\n%s / peer in decisions per second: ratio of the medians over the runs (n); above 1, %s decides more per second.\n\n", base, base)
		writeRatios(w, s, base, rates)
	}

	if lat := s.Ratios(base, LatencyUnits); len(lat) > 0 {
		fmt.Fprintf(w, "\n%s / peer in 99th-percentile latency: ratio of the medians over the runs (n); below 1, %s answers sooner.\n\n", base, base)
		writeRatios(w, s, base, lat)
	}
}

// printMedians writes the table of base's own medians in each scenario
// it ran, and what ns/op means where that needs saying.
func printMedians(w io.Writer, s *Summary, base string) {
	fmt.Fprintf(w, "\n%s's own medians\n\n", base)
	units := []string{"ns/op", "decisions/s", "B/op", "allocs/op", "admit/op", "B/key"}
	rows := [][]string{append([]string{"scenario"}, units...)}
	for _, sc := range s.Scenarios {
		if !slices.Contains(s.Peers[sc], base) {
			continue
		}
		row := []string{sc}
		for _, u := range units {
			cell := "-"
			if v, ok := s.Median(sc, base, u); ok {
				cell = FormatValue(v)
			}
			row = append(row, cell)
		}
		rows = append(rows, row)
	}
	writeTable(w, rows, 1)
	fmt.Fprintln(w)
	if slices.Contains(s.Scenarios, "Memory") {
		fmt.Fprintf(w, "Memory's ns/op is the time to make a limiter and touch 1,000,000 new keys once each.\n")
	}
	if slices.ContainsFunc(s.Scenarios, func(sc string) bool { return reportsRate(s, sc, base) }) {
		fmt.Fprintf(w, "Where there are decisions/s, ns/op is wall time per decision, the callers sharing the calls.\n")
	}
}

// peersAndWarnings returns every peer of s, in the order they first
// appear, and a warning for each peer, in each scenario, that admitted a
// fraction of its calls at odds with the scenario's name, reported errors
// or evicted keys.
func peersAndWarnings(s *Summary) (peers, warnings []string) {
	seen := make(map[string]bool)
	for _, sc := range s.Scenarios {
		for _, p := range s.Peers[sc] {
			if !seen[p] {
				seen[p] = true
				peers = append(peers, p)
			}
			warnings = append(warnings, peerWarnings(s, sc, p)...)
		}
	}
	return peers, warnings
}

// peerWarnings returns the warnings about peer p in scenario sc: an
// admitted fraction at odds with the scenario's name, errors, evictions.
func peerWarnings(s *Summary, sc, p string) []string {
	var warnings []string
	if a, ok := s.Median(sc, p, "admit/op"); ok && !admitFits(sc, a) {
		warnings = append(warnings, fmt.Sprintf("%s in %s admitted %s of its calls", p, sc, FormatValue(a)))
	}
	if e, ok := s.Median(sc, p, "err/op"); ok {
		warnings = append(warnings, fmt.Sprintf("%s in %s: %s err/op (median over the %d of its runs that had errors)",
			p, sc, FormatValue(e), s.Runs[Key{sc, p, "err/op"}]))
	}
	if e, ok := s.Median(sc, p, "evictions"); ok {
		warnings = append(warnings, fmt.Sprintf("%s in %s evicted keys (median %s)", p, sc, FormatValue(e)))
	}
	return warnings
}

// writeRatios writes ratios as a table, with a blank line between
// scenarios when one of them has several rows.
func writeRatios(w io.Writer, s *Summary, base string, ratios []Ratio) {
	gaps := false
	for i := 1; i < len(ratios); i++ {
		gaps = gaps || ratios[i].Scenario == ratios[i-1].Scenario
	}
	rows := [][]string{{"scenario", "peer", "unit", base, "peer", "ratio", "n", base + " admit/op", "peer admit/op"}}
	last := ""
	for _, r := range ratios {
		if gaps && last != "" && r.Scenario != last {
			rows = append(rows, nil)
		}
		last = r.Scenario
		rows = append(rows, []string{r.Scenario, r.Peer, r.Unit,
			FormatValue(r.Base), FormatValue(r.Other), fmt.Sprintf("%.2f", r.Ratio), fmt.Sprint(r.Runs),
			admit(s, r.Scenario, base), admit(s, r.Scenario, r.Peer)})
	}
	writeTable(w, rows, 3)
}

// admitFits reports whether a fraction admitted fits the scenario's name:
// nearly none in a "denied" scenario, nearly all in any other.
func admitFits(scenario string, admit float64) bool {
	if slices.Contains(strings.Split(scenario, "/"), "denied") {
		return admit < 0.01
	}
	return admit > 0.99
}

func admit(s *Summary, scenario, peer string) string {
	a, ok := s.Median(scenario, peer, "admit/op")
	if !ok {
		return "-"
	}
	mark := ""
	if !admitFits(scenario, a) {
		mark = "!"
	}
	return FormatValue(a) + mark
}

// writeTable writes rows in columns two spaces apart, the first left
// columns aligned left and the others right, by characters (µ is one); a
// nil row is a blank line.
func writeTable(w io.Writer, rows [][]string, left int) {
	var width []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell))
			if i < left {
				b.WriteString(cell + pad)
			} else {
				b.WriteString(pad + cell)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
