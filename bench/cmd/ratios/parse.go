package main

import (
	"bufio"
	"io"
	"slices"
	"strconv"
	"strings"
)

// A Result is one line of `go test -bench` output for a benchmark named
// Benchmark<scenario>/<peer>[-GOMAXPROCS].
type Result struct {
	Scenario string             // "OneKey/allowed/serial": the name less "Benchmark" and the last element
	Peer     string             // "floodgate": the last element of the name
	Iters    int64              // b.N
	Values   map[string]float64 // by unit: "ns/op", "B/op", "allocs/op", "admit/op", "B/key", ...
}

// ParseLine parses one line of benchmark output. It reports false for any
// other line (headers, logs, PASS, ok) and for benchmarks without a
// sub-benchmark (no peer).
func ParseLine(line string) (Result, bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 || !strings.HasPrefix(f[0], "Benchmark") {
		return Result{}, false
	}
	iters, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return Result{}, false
	}
	name := trimProcs(strings.TrimPrefix(f[0], "Benchmark"))
	slash := strings.LastIndexByte(name, '/')
	if slash <= 0 || slash == len(name)-1 {
		return Result{}, false
	}
	r := Result{Scenario: name[:slash], Peer: name[slash+1:], Iters: iters, Values: make(map[string]float64)}
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return Result{}, false
		}
		r.Values[f[i+1]] = v
	}
	return r, true
}

// trimProcs removes the "-N" GOMAXPROCS suffix that go test appends to
// benchmark names when GOMAXPROCS > 1.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || i == len(name)-1 {
		return name
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return name
		}
	}
	return name[:i]
}

// Parse reads benchmark output and returns its results in order.
func Parse(r io.Reader) ([]Result, error) {
	var out []Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if res, ok := ParseLine(sc.Text()); ok {
			out = append(out, res)
		}
	}
	return out, sc.Err()
}

// A Key names one peer's figures in one scenario for one unit.
type Key struct{ Scenario, Peer, Unit string }

// A Summary holds the median of each scenario, peer and unit over the
// runs.
type Summary struct {
	Scenarios []string            // in order of first appearance
	Peers     map[string][]string // each scenario's peers in order of first appearance
	Runs      map[Key]int         // how many runs reported the unit
	Medians   map[Key]float64
}

// Summarise groups results by scenario and peer and takes the median of
// each unit over the runs.
func Summarise(results []Result) *Summary {
	s := &Summary{Peers: make(map[string][]string), Runs: make(map[Key]int), Medians: make(map[Key]float64)}
	values := make(map[Key][]float64)
	for _, r := range results {
		peers, seen := s.Peers[r.Scenario]
		if !seen {
			s.Scenarios = append(s.Scenarios, r.Scenario)
		}
		if !slices.Contains(peers, r.Peer) {
			s.Peers[r.Scenario] = append(peers, r.Peer)
		}
		for unit, v := range r.Values {
			k := Key{r.Scenario, r.Peer, unit}
			values[k] = append(values[k], v)
		}
	}
	for k, vs := range values {
		s.Runs[k] = len(vs)
		s.Medians[k] = Median(vs)
	}
	return s
}

// Median returns the median of vs (the mean of the middle two for an even
// count), or 0 for none.
func Median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// Median returns the median of unit for peer in scenario, and whether
// there is one.
func (s *Summary) Median(scenario, peer, unit string) (float64, bool) {
	v, ok := s.Medians[Key{scenario, peer, unit}]
	return v, ok
}

// A Ratio compares the base peer with another in one scenario and unit.
type Ratio struct {
	Scenario, Peer, Unit string
	Base, Other          float64 // the medians
	Ratio                float64 // Base / Other
	Runs                 int     // the other peer's runs
}

// Ratios returns, for each scenario in which base ran and each unit of
// units that both report, base's median over each other peer's.
func (s *Summary) Ratios(base string, units []string) []Ratio {
	var out []Ratio
	for _, sc := range s.Scenarios {
		if !slices.Contains(s.Peers[sc], base) {
			continue
		}
		for _, unit := range units {
			b, ok := s.Median(sc, base, unit)
			if !ok {
				continue
			}
			for _, p := range s.Peers[sc] {
				o, ok := s.Median(sc, p, unit)
				if p == base || !ok {
					continue
				}
				r := Ratio{Scenario: sc, Peer: p, Unit: unit, Base: b, Other: o, Runs: s.Runs[Key{sc, p, unit}]}
				r.Ratio = b / o
				out = append(out, r)
			}
		}
	}
	return out
}

// FormatValue prints a median with about three significant digits, or
// as an integer from 100 up.
func FormatValue(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v < 1e-3 && v > -1e-3:
		return strconv.FormatFloat(v, 'e', 1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}
