package main

import (
	"strings"
	"testing"
)

// testdata/floor.txt is made up, shaped like `make bench` output with the
// floor pseudo-peer: two runs of each line, in scenarios with and without
// x/time/rate, and a Memory scenario, where the floor does not run.

func TestFloors(t *testing.T) {
	s := Summarise(readTestdata(t, "floor.txt"))
	got := Floors(s, "floodgate")
	want := []Floor{
		{"OneKey/allowed/serial", "floor", 31.5, 89, 52},
		{"OneKey/denied/parallel", "floor", 21, 0, 31},
		{"Keys1M/serial", "floor", 440, 645, 405},
	}
	if len(got) != len(want) {
		t.Fatalf("floors %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("floor %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	var b strings.Builder
	Print(&b, s, "floodgate", nil)
	out := b.String()
	for _, line := range []string{
		"\nThe floor: the least work of any exact keyed limiter",
		"\n  OneKey/allowed/serial: floor 31.5 ns = 0.35x xrate; floodgate 52 ns = 1.65x the floor (+20.5 ns)\n",
		"\n  OneKey/denied/parallel: floor 21 ns; floodgate 31 ns = 1.48x the floor (+10 ns)\n",
		"\n  Keys1M/serial: floor 440 ns = 0.68x xrate; floodgate 405 ns = 0.92x the floor (-35 ns)\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("output lacks %q:\n%s", line, out)
		}
	}
	// The floor reads floodgate's clock: it is listed above the clock.
	if !strings.Contains(out, "OneKey/allowed/serial  floor      floodgate   31.5         23.5                8\n") {
		t.Errorf("output lacks the floor above the clock:\n%s", out)
	}
	if strings.Contains(out, "Warnings") {
		t.Errorf("warnings:\n%s", out)
	}

	// Without the floor, no such section.
	b.Reset()
	Print(&b, Summarise(readSample(t)), "floodgate", nil)
	if strings.Contains(b.String(), "The floor") {
		t.Error("a floor section without the floor")
	}
}
