package main

import (
	"math"
	"os"
	"strings"
	"testing"
)

// testdata/sample.txt is real output of
//
//	go test -run '^$' -bench 'OneKey/allowed/serial/(floodgate|xrate|uber)$|OneKey/denied/serial/golimiter|Memory/(floodgate|ulule)' \
//		-benchmem -count 3 -benchtime 100ms
//
// run in the bench module on the project's 2-core machine.
//
// testdata/redis.txt is real output of
//
//	go test -run '^$' -bench 'Redis' -benchtime 200ms -count 2
//
// run there too.
func readSample(t *testing.T) []Result { return readTestdata(t, "sample.txt") }

func readTestdata(t *testing.T, name string) []Result {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestParse(t *testing.T) {
	rs := readSample(t)
	if len(rs) != 18 {
		t.Fatalf("parsed %d results, want 18", len(rs))
	}
	r := rs[0]
	if r.Scenario != "OneKey/allowed/serial" || r.Peer != "floodgate" || r.Iters != 1464585 {
		t.Errorf("first result = %q %q %d, want OneKey/allowed/serial floodgate 1464585", r.Scenario, r.Peer, r.Iters)
	}
	want := map[string]float64{"ns/op": 80.33, "admit/op": 1, "B/op": 0, "allocs/op": 0}
	if len(r.Values) != len(want) {
		t.Errorf("first result's values = %v, want %v", r.Values, want)
	}
	for u, v := range want {
		if r.Values[u] != v {
			t.Errorf("first result's %s = %v, want %v", u, r.Values[u], v)
		}
	}
	d := rs[9]
	if d.Scenario != "OneKey/denied/serial" || d.Peer != "golimiter" || d.Values["admit/op"] != 0.0000070 {
		t.Errorf("result 9 = %+v, want golimiter in OneKey/denied/serial admitting 0.0000070", d)
	}
	m := rs[17]
	if m.Scenario != "Memory" || m.Peer != "ulule" || m.Values["B/key"] != 193.6 || m.Values["ns/op"] != 1163048892 ||
		m.Values["allocs/op"] != 5359768 {
		t.Errorf("last result = %+v, want Memory ulule 193.6 B/key, 1163048892 ns/op, 5359768 allocs/op", m)
	}
}

func TestParseLineRejects(t *testing.T) {
	for _, line := range []string{
		"goos: linux",
		"pkg: github.com/floodgate/floodgate/bench",
		"cpu: Oxide Virtual Turin-like Processor             ",
		"PASS",
		"ok  \tgithub.com/floodgate/floodgate/bench\t10.523s",
		"BenchmarkOneKey/allowed/serial/floodgate-2", // a name alone, as -v prints it
		"    bench_test.go:101: 3 errors in 1000 calls; the first: boom",
		"BenchmarkDecide-2   \t 1000000\t        12.5 ns/op", // no sub-benchmark: no peer
		"BenchmarkOneKey/allowed/serial/floodgate-2   \t lots\t        80.33 ns/op",
		"",
	} {
		if r, ok := ParseLine(line); ok {
			t.Errorf("ParseLine(%q) = %+v, want rejected", line, r)
		}
	}
}

func TestTrimProcs(t *testing.T) {
	for in, want := range map[string]string{
		"OneKey/allowed/serial/floodgate-2":   "OneKey/allowed/serial/floodgate",
		"OneKey/allowed/serial/floodgate-16":  "OneKey/allowed/serial/floodgate",
		"OneKey/allowed/serial/xrate-nokey":   "OneKey/allowed/serial/xrate-nokey",
		"OneKey/allowed/serial/xrate-nokey-2": "OneKey/allowed/serial/xrate-nokey",
		"Memory/floodgate":                    "Memory/floodgate",
		"Memory/x-":                           "Memory/x-",
	} {
		if got := trimProcs(in); got != want {
			t.Errorf("trimProcs(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{81.73, 80.16, 80.33}, 80.33}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestSummariseAndRatios(t *testing.T) {
	s := Summarise(readSample(t))
	wantScenarios := []string{"OneKey/allowed/serial", "OneKey/denied/serial", "Memory"}
	if strings.Join(s.Scenarios, ",") != strings.Join(wantScenarios, ",") {
		t.Errorf("scenarios = %v, want %v", s.Scenarios, wantScenarios)
	}
	if got := strings.Join(s.Peers["OneKey/allowed/serial"], ","); got != "floodgate,xrate,uber" {
		t.Errorf("peers of OneKey/allowed/serial = %s, want floodgate,xrate,uber", got)
	}
	for _, c := range []struct {
		k    Key
		want float64
	}{
		{Key{"OneKey/allowed/serial", "floodgate", "ns/op"}, 80.33},
		{Key{"OneKey/allowed/serial", "xrate", "ns/op"}, 106.0},
		{Key{"OneKey/allowed/serial", "uber", "ns/op"}, 63.18},
		{Key{"OneKey/denied/serial", "golimiter", "admit/op"}, 0.0000070},
		{Key{"Memory", "floodgate", "B/key"}, 69.22},
		{Key{"Memory", "ulule", "B/key"}, 193.6},
		{Key{"Memory", "ulule", "ns/op"}, 1163048892},
	} {
		if got, ok := s.Median(c.k.Scenario, c.k.Peer, c.k.Unit); !ok || got != c.want || s.Runs[c.k] != 3 {
			t.Errorf("median of %v = %v, %v over %d runs, want %v over 3", c.k, got, ok, s.Runs[c.k], c.want)
		}
	}

	rs := s.Ratios("floodgate", Units)
	want := []Ratio{
		{"OneKey/allowed/serial", "xrate", "ns/op", 80.33, 106.0, 80.33 / 106.0, 3},
		{"OneKey/allowed/serial", "uber", "ns/op", 80.33, 63.18, 80.33 / 63.18, 3},
		// OneKey/denied/serial has no floodgate result: no ratio.
		{"Memory", "ulule", "ns/op", 474685856, 1163048892, 474685856.0 / 1163048892, 3},
		{"Memory", "ulule", "B/key", 69.22, 193.6, 69.22 / 193.6, 3},
	}
	if len(rs) != len(want) {
		t.Fatalf("ratios = %+v, want %+v", rs, want)
	}
	for i := range want {
		g, w := rs[i], want[i]
		if g.Scenario != w.Scenario || g.Peer != w.Peer || g.Unit != w.Unit || g.Base != w.Base || g.Other != w.Other ||
			math.Abs(g.Ratio-w.Ratio) > 1e-12 || g.Runs != w.Runs {
			t.Errorf("ratio %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestPrint(t *testing.T) {
	var b strings.Builder
	Print(&b, Summarise(readSample(t)), "floodgate", map[string]string{"uber": "paces, never denies"})
	out := b.String()
	for _, want := range []string{
		"OneKey/allowed/serial  xrate  ns/op       80.3         106   0.76  3",
		"OneKey/allowed/serial  uber   ns/op       80.3        63.2   1.27  3",
		"Memory                 ulule  B/key       69.2         194   0.36  3",
		"uber         paces, never denies",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Warnings") {
		t.Errorf("output warns though every admitted fraction fits its scenario:\n%s", out)
	}
}

func TestAdmitFits(t *testing.T) {
	for _, c := range []struct {
		scenario string
		admit    float64
		want     bool
	}{
		{"OneKey/allowed/serial", 1, true},
		{"OneKey/allowed/serial", 0.0003, false}, // e.g. go-limiter above its correct range
		{"OneKey/denied/parallel", 0.0000070, true},
		{"OneKey/denied/parallel", 0.5, false},
		{"Keys1M/serial", 0.999, true},
		{"Memory", 1, true},
	} {
		if got := admitFits(c.scenario, c.admit); got != c.want {
			t.Errorf("admitFits(%q, %v) = %v, want %v", c.scenario, c.admit, got, c.want)
		}
	}
}

func TestRedisRatios(t *testing.T) {
	s := Summarise(readTestdata(t, "redis.txt"))
	var want []string
	for _, k := range []string{"1", "100000"} {
		for _, c := range []string{"1", "16", "64"} {
			want = append(want, "Redis/keys="+k+"/callers="+c)
		}
	}
	if strings.Join(s.Scenarios, ",") != strings.Join(want, ",") {
		t.Errorf("scenarios = %v, want %v", s.Scenarios, want)
	}
	if got := strings.Join(s.Peers["Redis/keys=1/callers=64"], ","); got != "floodgate,redis_rate" {
		t.Errorf("peers of Redis/keys=1/callers=64 = %s, want floodgate,redis_rate", got)
	}
	if len(s.Ratios("floodgate", Units)) != 6 {
		t.Errorf("ratios in %v = %+v, want one per scenario", Units, s.Ratios("floodgate", Units))
	}

	// Rates: floodgate's decisions per second over redis_rate's, so above 1
	// floodgate decides more.
	rs := s.Ratios("floodgate", RateUnits)
	if len(rs) != 6 {
		t.Fatalf("rate ratios = %+v, want one per scenario", rs)
	}
	for i, w := range []Ratio{
		{"Redis/keys=1/callers=1", "redis_rate", "decisions/s", (11302 + 10131) / 2.0, (18204 + 14329) / 2.0, 0, 2},
		{"Redis/keys=1/callers=64", "redis_rate", "decisions/s", (90590 + 86151) / 2.0, (28203 + 26449) / 2.0, 0, 2},
	} {
		g := rs[[]int{0, 2}[i]]
		w.Ratio = w.Base / w.Other
		if g.Scenario != w.Scenario || g.Peer != w.Peer || g.Unit != w.Unit || g.Base != w.Base || g.Other != w.Other ||
			math.Abs(g.Ratio-w.Ratio) > 1e-12 || g.Runs != w.Runs {
			t.Errorf("rate ratio = %+v, want %+v", g, w)
		}
	}

	var b strings.Builder
	Print(&b, Summarise(append(readSample(t), readTestdata(t, "redis.txt")...)), "floodgate", nil)
	out := b.String()
	for _, want := range []string{
		"OneKey/allowed/serial  xrate  ns/op       80.3         106   0.76  3",
		"above 1, floodgate decides more per second",
		"Redis/keys=1/callers=1        redis_rate  decisions/s      10716  16266   0.66  2",
		"Redis/keys=1/callers=64       redis_rate  decisions/s      88370  27326   3.23  2",
		"Redis/keys=100000/callers=64      17404        59046",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// A Redis scenario's ns/op is the inverse of its decisions/s: it is not
	// compared a second time, the other way round.
	if strings.Contains(out, "redis_rate  ns/op") {
		t.Errorf("output compares the Redis scenarios in ns/op too:\n%s", out)
	}
	if strings.Contains(out, "Warnings") {
		t.Errorf("output warns though every peer admitted nearly every call without errors:\n%s", out)
	}
}
