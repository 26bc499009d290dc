package main

import (
	"math"
	"strings"
	"testing"
)

// testdata/middleware.txt is real output of
//
//	go test -run '^$' -bench 'Middleware|Loopback' -benchmem -benchtime 2000x -count 2
//
// run in the bench module on the project's 2-core machine.

func TestOverheads(t *testing.T) {
	s := Summarise(readTestdata(t, "middleware.txt"))
	got := Overheads(s)
	var peers []string
	for _, o := range got {
		peers = append(peers, o.Scenario+" "+o.Peer)
	}
	want := []string{
		"Middleware/admitted/serial floodgate", "Middleware/admitted/serial httprate", "Middleware/admitted/serial golimiter-http",
		"Middleware/admitted/parallel floodgate", "Middleware/admitted/parallel httprate", "Middleware/admitted/parallel golimiter-http",
	}
	if strings.Join(peers, ",") != strings.Join(want, ",") {
		t.Fatalf("overheads for %q, want %q", peers, want)
	}
	// floodgate serial: medians 1048, bare 107.87, core 850.85.
	mw, _ := s.Median("Middleware/admitted/serial", "floodgate", "ns/op")
	bare, _ := s.Median("Middleware/admitted/serial", "bare", "ns/op")
	core, _ := s.Median("Middleware/admitted/serial", "floodgate-core", "ns/op")
	if w := (mw - bare) / (core - bare); math.Abs(got[0].Ratio-w) > 1e-12 {
		t.Errorf("floodgate's overhead %v, want %v", got[0].Ratio, w)
	}
}

func TestPrintOverheads(t *testing.T) {
	var b strings.Builder
	Print(&b, Summarise(readTestdata(t, "middleware.txt")), "floodgate", nil)
	out := b.String()
	for _, want := range []string{
		"Middleware overhead: (peer - bare) / (floodgate-core - bare) in ns/op; floodgate's target is at most 1.5.",
		"Middleware/admitted/serial    floodgate           1.27",
		"Loopback/fixed-window-1000-per-1m/conns=64  28838        34729",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Warnings") {
		t.Errorf("warnings:\n%s", out)
	}
	// Without the middleware scenarios, no such section.
	b.Reset()
	Print(&b, Summarise(readSample(t)), "floodgate", nil)
	if strings.Contains(b.String(), "Middleware overhead") {
		t.Error("a middleware section without middleware scenarios")
	}
}
