package main

import (
	"math"
	"strings"
	"testing"
)

// clockRun is shaped like `make bench` output with BenchmarkClock: two
// runs of each line.
const clockRun = `
BenchmarkOneKey/allowed/serial/floodgate-2   	16190980	        76 ns/op	         1.000 admit/op
BenchmarkOneKey/allowed/serial/floodgate-2   	16190980	        74 ns/op	         1.000 admit/op
BenchmarkOneKey/allowed/serial/xrate-2       	11162714	       108 ns/op	         1.000 admit/op
BenchmarkOneKey/allowed/serial/xrate-2       	11162714	       110 ns/op	         1.000 admit/op
BenchmarkOneKey/allowed/serial/golimiter-2   	11162714	       120 ns/op	         1.000 admit/op
BenchmarkOneKey/allowed/parallel/floodgate-2 	11162714	       170 ns/op	         1.000 admit/op
BenchmarkClock/time.Now-2                    	30000000	        54 ns/op
BenchmarkClock/time.Now-2                    	30000000	        56 ns/op
BenchmarkClock/floodgate-2                   	30000000	        29 ns/op
BenchmarkClock/floodgate-2                   	30000000	        31 ns/op
`

func TestAboveClocks(t *testing.T) {
	rs, err := Parse(strings.NewReader(clockRun))
	if err != nil {
		t.Fatal(err)
	}
	got := AboveClocks(Summarise(rs))
	// Serial scenarios only, peers with a known clock only.
	want := []AboveClock{
		{"OneKey/allowed/serial", "floodgate", "floodgate", 75, 30},
		{"OneKey/allowed/serial", "xrate", "time.Now", 109, 55},
	}
	if len(got) != len(want) {
		t.Fatalf("above the clock %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("above the clock %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if a := got[0].Above(); math.Abs(a-45) > 1e-9 {
		t.Errorf("floodgate above its clock: %v, want 45", a)
	}
	var b strings.Builder
	Print(&b, Summarise(rs), "floodgate", nil)
	for _, line := range []string{"Above the clock", "OneKey/allowed/serial  xrate      time.Now     109           55               54"} {
		if !strings.Contains(b.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, b.String())
		}
	}
	// Without BenchmarkClock, no such section.
	b.Reset()
	Print(&b, Summarise(readSample(t)), "floodgate", nil)
	if strings.Contains(b.String(), "Above the clock") {
		t.Error("an above-the-clock section without BenchmarkClock")
	}
}
