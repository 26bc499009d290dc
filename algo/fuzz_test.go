package algo_test

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/reference"
)

// FuzzDecide builds a policy from fuzzed numbers (skipping those New
// rejects) and decides a fuzzed trace of at most fuzzMaxEvents events. It
// checks that Decide does not panic, that bad times and costs are errors
// that leave the state alone, the cheap invariants of property_test.go
// (denials and peeks leave the state, Never, RetryAfter and ResetAfter are
// exact, ResetAt agrees, the encoding round-trips) and agreement with the
// reference on every valid event.
//
// The trace is a sequence of records: a flag byte, a uvarint gap and a
// uvarint cost. Flag bits 0-1 pick the key (a, b, c); bits 2-3 the time:
// 0 advances by gap ns, 1 by gap sixteenths of PERIOD, 2 jumps to the next
// window boundary plus gap%3 - 1, 3 is an invalid time (bit 4: after
// MaxTime, else negative) that must be rejected; bit 5 negates the cost
// (an invalid cost).
func FuzzDecide(f *testing.F) {
	seeds := []struct {
		alg                  algo.Algorithm
		limit, period, burst int64
	}{
		{algo.TokenBucket, 3, 1e9, 5},
		{algo.TokenBucket, 7, 2e9, 7},
		{algo.LeakyBucket, 7, 2e9, 3},
		{algo.SlidingLog, 5, 60e9, 0},
		{algo.SlidingWindow, 3, 500e6, 0},
		{algo.FixedWindow, 7, 2e9, 0},
		{algo.TokenBucket, algo.MaxLimit, int64(algo.MaxPeriod), 0},
		{algo.SlidingWindow, 7, 3, 0},
		{algo.TokenBucket, 1_250_000_000, 1e9, 1 << 32},
		{algo.LeakyBucket, algo.MaxLimit, 1e9, algo.MaxLimit},
		{algo.SlidingLog, algo.MaxLimit, int64(algo.MaxPeriod), 0},
		{algo.SlidingWindow, algo.MaxLimit - 1, 1e9, 0},
		{algo.FixedWindow, 1<<32 + 1, 7, 0},
	}
	traces := [][]byte{
		{0, 0, 5, 0, 0, 1, 0, 1, 1, 4, 2, 1, 4, 3, 0},
		{0, 0, 1, 0, 0, 1, 8, 0, 2, 8, 1, 1, 1, 0, 9, 0x0c, 5, 1, 0x20, 0, 1, 0x1c, 0, 1},
		{1, 0, 3, 2, 0, 3, 4, 8, 1, 5, 16, 2, 0, 0xff, 0xff, 0x03, 1, 6, 0, 0},
	}
	for _, s := range seeds {
		for _, tr := range traces {
			f.Add(uint8(s.alg), s.limit, s.period, s.burst, tr)
		}
	}
	f.Fuzz(func(t *testing.T, alg uint8, limit, period, burst int64, trace []byte) {
		p, err := algo.New(algo.Algorithm(alg), limit, time.Duration(period), burst)
		if err != nil {
			if !errors.Is(err, algo.ErrInvalidPolicy) {
				t.Fatalf("New: %v does not wrap ErrInvalidPolicy", err)
			}
			t.Skip()
		}
		fuzzTrace(t, p, trace)
	})
}

const fuzzMaxEvents = 48

func fuzzTrace(t *testing.T, p algo.Policy, trace []byte) {
	P := int64(p.Period())
	model := refModel(p)
	states := map[string]*algo.State{}
	var now int64
	var events []reference.Event // the valid ones, for messages
	for len(trace) > 0 && len(events) < fuzzMaxEvents {
		flag := trace[0]
		trace = trace[1:]
		gap, k := binary.Uvarint(trace)
		if k <= 0 {
			return
		}
		trace = trace[k:]
		c, k := binary.Uvarint(trace)
		if k <= 0 {
			return
		}
		trace = trace[k:]
		key := []string{"a", "b", "c"}[flag&3%3]
		cost := int64(c & math.MaxInt64)
		if flag&0x20 != 0 {
			cost = -1 - cost
		}
		at := now
		invalidTime := false
		switch flag >> 2 & 3 {
		case 0:
			at = fuzzSatAdd(now, gap)
		case 1:
			at = fuzzSatAdd(now, uint64(P)*(gap%64)/16)
		case 2:
			at = fuzzSatAdd(min(now/P*P+P, algo.MaxTime), gap%3)
			if at > now {
				at--
			}
		case 3:
			invalidTime = true
			if flag&0x10 != 0 {
				at = algo.MaxTime + 1 + int64(gap%(1<<61))
			} else {
				at = -1 - int64(gap%(1<<62))
			}
		}
		s := states[key]
		if s == nil {
			s = new(algo.State)
			states[key] = s
		}
		before := propEncode(t, s)
		d, err := p.Decide(s, at, cost)
		if invalidTime || cost < 0 {
			want := algo.ErrInvalidCost
			if invalidTime {
				want = algo.ErrInvalidTime
			}
			if !errors.Is(err, want) && !(invalidTime && cost < 0 && errors.Is(err, algo.ErrInvalidCost)) || d != (algo.Decision{}) {
				t.Fatalf("rule invalid-input-error: %q Decide(%d, %d) = %+v, %v; want %v", p.String(), at, cost, d, err, want)
			}
			if !slices.Equal(before, propEncode(t, s)) {
				t.Fatalf("rule invalid-input-leaves-state: %q Decide(%d, %d)", p.String(), at, cost)
			}
			continue
		}
		now = at
		e := reference.Event{T: at, Key: key, N: cost}
		events = append(events, e)
		st := propStep{ev: e, d: d, err: err, before: before, after: propEncode(t, s)}
		if msg := refCompare(refCoreStep{d, err}, model.Decide(e)); msg != "" {
			t.Fatalf("%s at event %d\n%s", msg, len(events)-1, refFormatTrace(p, events))
		}
		if msg := fuzzInvariants(t, p, st); msg != "" {
			t.Fatalf("%s at event %d %+v -> %+v\n%s", msg, len(events)-1, e, d, refFormatTrace(p, events))
		}
	}
}

// fuzzInvariants checks the cheap invariants of one decided event and
// returns the broken rule, or "".
func fuzzInvariants(t *testing.T, p algo.Policy, st propStep) string {
	d, e := st.d, st.ev
	switch {
	case e.N > p.Burst() && (d.Allowed || d.RetryAfter != algo.Never || !errors.Is(st.err, algo.ErrCostExceedsBurst)):
		return "rule never"
	case e.N <= p.Burst() && st.err != nil:
		return "rule no-error: " + st.err.Error()
	case (!d.Allowed || e.N == 0) && !slices.Equal(st.before, st.after):
		return "rule denial-or-peek-leaves-state"
	case !slices.Equal(propEncode(t, propDecode(t, st.after)), st.after):
		return "rule encoding-round-trip"
	}
	if !d.Allowed && d.RetryAfter != algo.Never {
		if at := e.T + int64(d.RetryAfter); d.RetryAfter > 0 && at <= algo.MaxTime {
			if d2, _ := p.Decide(propDecode(t, st.before), at, e.N); !d2.Allowed {
				return "rule retry_after-enough"
			}
			if d2, _ := p.Decide(propDecode(t, st.before), at-1, e.N); d2.Allowed {
				return "rule retry_after-shortest"
			}
		} else if d.RetryAfter <= 0 {
			return "rule denied-retry-positive"
		}
	}
	if at := e.T + int64(d.ResetAfter); at <= algo.MaxTime {
		if d2, _ := p.Decide(propDecode(t, st.after), at, 0); d2.Remaining != p.Burst() || d2.ResetAfter != 0 {
			return "rule reset_after-enough"
		}
		if d.ResetAfter > 0 {
			if d2, _ := p.Decide(propDecode(t, st.after), at-1, 0); d2.Remaining == p.Burst() && d2.ResetAfter == 0 {
				return "rule reset_after-shortest"
			}
		}
	}
	resetAt := p.ResetAt(propDecode(t, st.after))
	if d.ResetAfter > 0 && resetAt != e.T+int64(d.ResetAfter) || d.ResetAfter == 0 && resetAt > e.T {
		return "rule reset_at-matches-reset_after"
	}
	return ""
}

// fuzzSatAdd returns a+b, at most MaxTime.
func fuzzSatAdd(a int64, b uint64) int64 {
	if b > uint64(algo.MaxTime-a) {
		return algo.MaxTime
	}
	return a + int64(b)
}
