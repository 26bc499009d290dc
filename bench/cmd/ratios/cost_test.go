package main

import (
	"strings"
	"testing"
)

// testdata/cost.txt is made up: two runs each of floodgate and redis_rate
// in a Redis scenario that reports what a decision costs, and a service
// scenario on memory that reports cpu-ns/op alone.

func TestCosts(t *testing.T) {
	var b strings.Builder
	Print(&b, Summarise(readTestdata(t, "cost.txt")), "floodgate", nil)
	out := b.String()
	for _, want := range []string{
		"scenario                            peer        decisions/s  redis-µs/op  redis-cmds/op  redis-bytes/op  cpu-ns/op  floodgate/peer decisions/s  floodgate/peer redis-µs",
		// Medians of two runs: (50000+70000)/2 decisions/s, (16+20)/2 µs.
		"RedisPerDay/keys=100000/callers=64  floodgate         60000           18            1.1             210      31000                           -                        -",
		"RedisPerDay/keys=100000/callers=64  redis_rate        20000           18              4             300      40000                        3.00                     1.00",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Service/batch=1/callers=1  floodgate  11111") {
		t.Errorf("the cost table lists a scenario without Redis figures:\n%s", out)
	}

	// Without Redis figures, no cost table.
	b.Reset()
	Print(&b, Summarise(readTestdata(t, "flood.txt")), "floodgate", nil)
	if strings.Contains(b.String(), "redis-µs/op") {
		t.Errorf("output has a cost table without Redis figures:\n%s", b.String())
	}
}
