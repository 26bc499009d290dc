package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/reference"
	"github.com/floodgate/floodgate/internal/seconds"
)

// TestSimulateMatchesReference is the acceptance test: random
// traces of 250 events, for every algorithm, go through `floodgate
// simulate` as a user would run it, and every output line must match the
// independent exact model (internal/reference) field for field: allowed and
// remaining exactly, retry_after and reset_after to the nanosecond (the
// model's exact value rounded up), -1 for never.
func TestSimulateMatchesReference(t *testing.T) {
	policies := []string{
		"token-bucket 3/1s burst=5",
		"token-bucket 7/2 burst=7",
		"token-bucket 10/1m burst=1",
		"leaky-bucket 7/2s capacity=3",
		"leaky-bucket 1/1h capacity=20",
		"sliding-log 5/60",
		"sliding-log 2/10",
		"sliding-window 3/500ms",
		"sliding-window 7/3s",
		"fixed-window 7/2",
		"fixed-window 3/700ms",
	}
	traces := 20
	if testing.Short() {
		traces = 3
	}
	for _, ps := range policies {
		p, err := algo.ParsePolicy(ps)
		if err != nil {
			t.Fatal(err)
		}
		for seed := range traces {
			t.Run(fmt.Sprintf("%s/seed=%d", ps, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(seed), 42))
				in, events := randomTrace(rng, p, 250)
				var out, errOut bytes.Buffer
				if code := run([]string{"simulate", "--policy", ps}, strings.NewReader(in), &out, &errOut); code != 0 {
					t.Fatalf("exit %d: %s", code, errOut.String())
				}
				want := reference.Run(p.Algorithm().String(), p.Limit(), int64(p.Period()), p.Burst(), events)
				lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
				if len(lines) != len(events) {
					t.Fatalf("%d output lines for %d events", len(lines), len(events))
				}
				for i, line := range lines {
					if problem := compareLine(line, events[i], want[i]); problem != "" {
						t.Fatalf("event %d (%+v): %s\n  got  %s\n  want %v\n  trace:\n%s", i, events[i], problem, line, want[i], in)
					}
				}
			})
		}
	}
}

// randomTrace writes n events as a trace, in JSON or text lines at random,
// with times of up to nine decimals that often repeat, land on whole
// periods, or step by a fraction of the emission interval.
func randomTrace(rng *rand.Rand, p algo.Policy, n int) (string, []reference.Event) {
	var b strings.Builder
	var events []reference.Event
	period := int64(p.Period())
	now := rng.Int64N(3 * period)
	for range n {
		switch rng.IntN(6) {
		case 0: // same instant
		case 1:
			now = (now/period + 1) * period // a window edge
		case 2:
			now += period / p.Limit() / int64(1+rng.IntN(4))
		default:
			now += rng.Int64N(period/2 + 1)
		}
		ev := reference.Event{T: now, Key: []string{"alice", "bob", "a b\"c"}[rng.IntN(3)], N: int64(rng.IntN(int(p.Burst()) + 2))}
		if rng.IntN(10) == 0 {
			ev.N = 0
		}
		events = append(events, ev)
		secs := string(seconds.Append(nil, ev.T))
		if ev.Key == "a b\"c" || rng.IntN(2) == 0 {
			key, _ := json.Marshal(ev.Key)
			fmt.Fprintf(&b, "{\"t\": %s, \"key\": %s, \"n\": %d}\n", secs, key, ev.N)
		} else {
			fmt.Fprintf(&b, "%s %s %d\n", secs, ev.Key, ev.N)
		}
	}
	return b.String(), events
}

// compareLine checks one output line against the model's result and says
// what differs, or "".
func compareLine(line string, ev reference.Event, want reference.Result) string {
	var got struct {
		T          json.Number `json:"t"`
		Key        string      `json:"key"`
		N          int64       `json:"n"`
		Allowed    bool        `json:"allowed"`
		Remaining  int64       `json:"remaining"`
		RetryAfter json.Number `json:"retry_after"`
		ResetAfter json.Number `json:"reset_after"`
	}
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	if err := d.Decode(&got); err != nil {
		return fmt.Sprintf("not JSON: %v", err)
	}
	t, err := seconds.Parse(got.T.String())
	if err != nil || t != ev.T || got.Key != ev.Key || got.N != ev.N {
		return "the event is not echoed exactly"
	}
	if got.Allowed != want.Allowed || got.Remaining != want.Remaining {
		return "allowed or remaining differ"
	}
	reset, err := seconds.Parse(got.ResetAfter.String())
	if err != nil || reset != reference.CeilNanos(want.ResetAfter) {
		return "reset_after differs"
	}
	if want.Never {
		if got.RetryAfter != "-1" {
			return "retry_after is not -1 for a never-admissible cost"
		}
		return ""
	}
	retry, err := seconds.Parse(got.RetryAfter.String())
	if err != nil || retry != reference.CeilNanos(want.RetryAfter) {
		return "retry_after differs"
	}
	return ""
}
