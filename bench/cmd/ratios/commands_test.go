package main

import (
	"strings"
	"testing"
)

// testdata/flood.txt is real output of
//
//	go test -run '^$' -bench 'Flood' -benchmem -benchtime 2000x -count 2
//
// run in the bench module on the project's 2-core machine, before
// floodgate had a cache of denials.

func TestFloodCommands(t *testing.T) {
	s := Summarise(readTestdata(t, "flood.txt"))
	if got := strings.Join(s.Peers["FloodService/denied/keys=1000/callers=64"], ","); got != "floodgate,envoy-ratelimit,envoy-ratelimit-cache" {
		t.Errorf("peers of FloodService/denied/keys=1000/callers=64 = %s, want floodgate,envoy-ratelimit,envoy-ratelimit-cache", got)
	}
	if v, ok := s.Median("FloodRedis/denied/keys=1/callers=64", "redis_rate", "redis-cmds/s"); !ok || v != (19170+28084)/2.0 {
		t.Errorf("redis_rate's median redis-cmds/s on one key = %v, %v, want %v", v, ok, (19170+28084)/2.0)
	}

	var b strings.Builder
	Print(&b, s, "floodgate", nil)
	out := b.String()
	for _, want := range []string{
		// The rates are compared as in the other Redis scenarios.
		"FloodRedis/denied/keys=1/callers=64       redis_rate             decisions/s     110846   7876  14.07  2",
		"FloodService/denied/keys=1000/callers=64  envoy-ratelimit-cache  decisions/s      15488  12838   1.21  2",
		// The commands are listed for every peer, floodgate's included.
		"scenario                                  peer                   decisions/s  redis-cmds/s  cmds/key/retry  admit/op",
		"FloodRedis/denied/keys=1000/callers=64    floodgate                    76508          7820            2815         0",
		"FloodService/denied/keys=1000/callers=64  envoy-ratelimit-cache        12838          3.38             292         0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Warnings") {
		t.Errorf("output warns though every peer denied nearly every call without errors:\n%s", out)
	}

	// Without flood scenarios, no table of commands.
	b.Reset()
	Print(&b, Summarise(readTestdata(t, "redis.txt")), "floodgate", nil)
	if strings.Contains(b.String(), "redis-cmds/s") {
		t.Errorf("output has a table of commands without flood scenarios:\n%s", b.String())
	}
}
