package algo_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

var allPolicies = []string{
	"token-bucket 3/1s burst=5",
	"leaky-bucket 7/2s capacity=3",
	"sliding-log 5/1m",
	"sliding-window 3/500ms",
	"fixed-window 7/2s",
}

func encode(t testing.TB, s *algo.State) []byte {
	t.Helper()
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecideErrors(t *testing.T) {
	for _, ps := range allPolicies {
		t.Run(ps, func(t *testing.T) {
			p := mustParse(t, ps)
			var s algo.State
			decide(t, p, &s, time.Second, 2)
			before := encode(t, &s)
			for _, c := range []struct {
				now, n int64
				want   error
			}{
				{-1, 1, algo.ErrInvalidTime},
				{algo.MaxTime + 1, 1, algo.ErrInvalidTime},
				{int64(2 * time.Second), -1, algo.ErrInvalidCost},
			} {
				d, err := p.Decide(&s, c.now, c.n)
				if !errors.Is(err, c.want) || d != (algo.Decision{}) {
					t.Errorf("Decide(now=%d, n=%d) = %+v, %v; want the zero Decision and %v", c.now, c.n, d, err, c.want)
				}
			}
			var zero algo.Policy
			if _, err := zero.Decide(&s, 0, 1); !errors.Is(err, algo.ErrInvalidPolicy) {
				t.Errorf("zero Policy: error %v, want ErrInvalidPolicy", err)
			}
			if !bytes.Equal(before, encode(t, &s)) {
				t.Errorf("an error changed the state")
			}
		})
	}
}

func TestCostExceedsBurst(t *testing.T) {
	for _, ps := range allPolicies {
		t.Run(ps, func(t *testing.T) {
			p := mustParse(t, ps)
			var s algo.State
			decide(t, p, &s, time.Second, 1)
			peek := decide(t, p, &s, time.Second, 0)
			before := encode(t, &s)
			d, err := p.Decide(&s, int64(time.Second), p.Burst()+1)
			if !errors.Is(err, algo.ErrCostExceedsBurst) {
				t.Errorf("error %v, want ErrCostExceedsBurst", err)
			}
			want := algo.Decision{Allowed: false, Remaining: peek.Remaining, RetryAfter: algo.Never, ResetAfter: peek.ResetAfter}
			if d != want {
				t.Errorf("Decide(burst+1) = %+v, want %+v", d, want)
			}
			if !bytes.Equal(before, encode(t, &s)) {
				t.Errorf("a never-admissible event changed the state")
			}
			if d := decide(t, p, &s, time.Second, 0); !d.Allowed || d != peek {
				t.Errorf("peek after it = %+v, want %+v", d, peek)
			}
		})
	}
}

// A full policy's worth of units at one instant is admitted exactly, the
// next unit is not, and a peek reports the same headroom.
func TestBurstAtOneInstant(t *testing.T) {
	for _, ps := range allPolicies {
		t.Run(ps, func(t *testing.T) {
			p := mustParse(t, ps)
			var s algo.State
			now := 3 * time.Second
			for i := range p.Burst() {
				d := decide(t, p, &s, now, 1)
				if !d.Allowed || d.Remaining != p.Burst()-i-1 || d.RetryAfter != 0 || d.ResetAfter <= 0 {
					t.Fatalf("unit %d: %+v, want admitted with %d remaining", i, d, p.Burst()-i-1)
				}
			}
			d := decide(t, p, &s, now, 1)
			if d.Allowed || d.Remaining != 0 || d.RetryAfter <= 0 {
				t.Fatalf("unit %d: %+v, want denied", p.Burst(), d)
			}
			if peek := decide(t, p, &s, now, 0); !peek.Allowed || peek.Remaining != 0 || peek.ResetAfter != d.ResetAfter {
				t.Errorf("peek = %+v, want admitted, 0 remaining, ResetAfter %v", peek, d.ResetAfter)
			}
		})
	}
}

// Policies whose emission interval T = PERIOD/LIMIT is not a whole number
// of nanoseconds never drift: a client spending the whole LIMIT at the start
// of every PERIOD, where the schedule is exact again, is admitted in full
// every time for a million periods, its next unit is always told to wait
// exactly ceil(T), and the bucket is always exactly empty again one PERIOD
// later. Any rounding of T would accumulate and break one of these.
func TestNoDrift(t *testing.T) {
	for _, ps := range []string{
		"token-bucket 3/1s",
		"leaky-bucket 7/2s",
		"token-bucket 1000000000/8784h",
		"token-bucket 1000/7ms burst=999",
	} {
		t.Run(ps, func(t *testing.T) {
			p := mustParse(t, ps)
			limit, period := p.Limit(), int64(p.Period())
			unit := time.Duration((period + limit - 1) / limit) // ceil(T)
			// ceil(burst*T), the time a full bucket takes to drain
			b := new(big.Int).Mul(big.NewInt(p.Burst()), big.NewInt(period))
			b.Add(b, big.NewInt(limit-1)).Quo(b, big.NewInt(limit))
			drain := time.Duration(b.Int64())
			periods := int64(1_000_000)
			if testing.Short() {
				periods = 10_000
			}
			periods = min(periods, algo.MaxTime/period-1) // a century of the longest periods
			start := int64(algo.MaxTime) - periods*period - 1
			var s algo.State
			for k := int64(0); k < periods; k++ {
				now := start + k*period
				d, err := p.Decide(&s, now, p.Burst())
				if err != nil || !d.Allowed || d.Remaining != 0 || d.ResetAfter != drain {
					t.Fatalf("period %d: whole burst %+v, %v; want admitted, reset after %v", k, d, err, drain)
				}
				if p.Burst() < limit {
					continue // not empty again until more than one PERIOD later
				}
				if d = decide(t, p, &s, time.Duration(now), 1); d.Allowed || d.RetryAfter != unit {
					t.Fatalf("period %d: one more unit %+v, want a wait of %v", k, d, unit)
				}
			}
		})
	}
}

// The largest policies at the latest times neither overflow nor lose
// exactness.
func TestBounds(t *testing.T) {
	for _, ps := range []string{
		"token-bucket 1000000000/8784h",
		"leaky-bucket 1/1h capacity=876600",
		"sliding-window 1000000000/8784h",
		"fixed-window 1000000000/8784h",
		"sliding-log 1000000000/8784h",
	} {
		t.Run(ps, func(t *testing.T) {
			p := mustParse(t, ps)
			var s algo.State
			now := time.Duration(algo.MaxTime)
			d := decide(t, p, &s, now, p.Burst())
			if !d.Allowed || d.Remaining != 0 {
				t.Fatalf("the whole burst at MaxTime: %+v", d)
			}
			d = decide(t, p, &s, now, 1)
			if d.Allowed || d.RetryAfter <= 0 || d.ResetAfter < d.RetryAfter {
				t.Fatalf("one more unit: %+v", d)
			}
			if at := p.ResetAt(&s); at < int64(now) {
				t.Errorf("ResetAt = %d, before now", at)
			}
		})
	}
	// A full bucket draining for a century.
	p := mustParse(t, "leaky-bucket 1/1h capacity=876600")
	var s algo.State
	decide(t, p, &s, 0, 876600)
	if d := decide(t, p, &s, 0, 0); d.ResetAfter != algo.MaxDrain {
		t.Errorf("ResetAfter = %v, want %v", d.ResetAfter, algo.MaxDrain)
	}
}

// A clock that steps back never admits more than the policy allows, and
// durations stay measured from the event's own time.
func TestTimeGoesBackwards(t *testing.T) {
	s := time.Second
	tests := []struct {
		policy string
		// admitted at 10s, then an event of cost 1 at 4s
		want algo.Decision
	}{
		// The bucket is empty at 10s (TAT 12s): an event at 4s waits
		// until TAT + T - tau = 11s, as it would have at 10s.
		{"token-bucket 1/1s burst=2", algo.Decision{Allowed: false, Remaining: 0, RetryAfter: 7 * s, ResetAfter: 8 * s}},
		// The log is judged at its last entry's time, 10s.
		{"sliding-log 2/10s", algo.Decision{Allowed: false, Remaining: 0, RetryAfter: 16 * s, ResetAfter: 16 * s}},
		// The windows stay in the stored window [10s, 20s).
		{"fixed-window 2/10s", algo.Decision{Allowed: false, Remaining: 0, RetryAfter: 16 * s, ResetAfter: 16 * s}},
		// est = 2*(10s-e)/10s in [20s, 30s) admits one more at e = 5s.
		{"sliding-window 2/10s", algo.Decision{Allowed: false, Remaining: 0, RetryAfter: 21 * s, ResetAfter: 26 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			p := mustParse(t, tt.policy)
			var st algo.State
			if d := decide(t, p, &st, 10*s, 2); !d.Allowed {
				t.Fatalf("burst at 10s denied: %+v", d)
			}
			if d := decide(t, p, &st, 4*s, 1); d != tt.want {
				t.Errorf("event at 4s = %+v, want %+v", d, tt.want)
			}
		})
	}
}

// A State written under one algorithm counts as the initial state under
// another, and a bucket state written under a larger limit stays usable.
func TestStateUnderAnotherPolicy(t *testing.T) {
	var s algo.State
	decide(t, mustParse(t, "sliding-log 3/1m"), &s, time.Second, 3)
	tb := mustParse(t, "token-bucket 2/1m")
	if d := decide(t, tb, &s, time.Second, 0); d.Remaining != 2 || d.ResetAfter != 0 {
		t.Errorf("a sliding-log state under token-bucket peeks %+v, want the initial state", d)
	}
	if d := decide(t, tb, &s, time.Second, 2); !d.Allowed {
		t.Errorf("a sliding-log state under token-bucket denies %+v", d)
	}
	// 7 per second leaves a fraction of 1/7 ns; read under 2 per second.
	var b algo.State
	decide(t, mustParse(t, "token-bucket 7/1s"), &b, 0, 1)
	if d := decide(t, mustParse(t, "token-bucket 2/1s"), &b, 0, 0); d.Remaining != 1 || d.ResetAfter != 142857143 {
		t.Errorf("peek under a smaller limit = %+v", d)
	}
}

func TestResetAt(t *testing.T) {
	for _, ps := range allPolicies {
		t.Run(ps, func(t *testing.T) {
			p := mustParse(t, ps)
			var s algo.State
			if at := p.ResetAt(&s); at != 0 {
				t.Errorf("ResetAt(initial) = %d, want 0", at)
			}
			now := 1234567891 * time.Nanosecond
			d := decide(t, p, &s, now, 1)
			if at := p.ResetAt(&s); at != int64(now+d.ResetAfter) {
				t.Errorf("ResetAt = %d, want now + ResetAfter = %d", at, int64(now+d.ResetAfter))
			}
		})
	}
}

func TestStateEncoding(t *testing.T) {
	for _, ps := range allPolicies {
		t.Run(ps, func(t *testing.T) {
			p := mustParse(t, ps)
			var s algo.State
			for i := range 40 {
				now := time.Duration(i) * 77 * time.Millisecond
				b := encode(t, &s)
				var r algo.State
				if err := r.UnmarshalBinary(b); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				if !bytes.Equal(encode(t, &r), b) {
					t.Fatalf("step %d: encoding does not round-trip", i)
				}
				if d1, d2 := decide(t, p, &s, now, 1), decide(t, p, &r, now, 1); d1 != d2 {
					t.Fatalf("step %d: decoded state decides %+v, original %+v", i, d2, d1)
				}
			}
		})
	}
}

func TestStateDecodingErrors(t *testing.T) {
	var s algo.State
	decide(t, mustParse(t, "fixed-window 5/1s"), &s, time.Second, 2)
	good := encode(t, &s)
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"version", []byte{9, 5, 0, 0, 0}},
		{"algorithm", []byte{1, 77, 0, 0, 0}},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte{}, good...), 0)},
		{"count too large", append(binary.AppendUvarint([]byte{1, byte(algo.FixedWindow), 0}, algo.MaxLimit+1), 0)},
		{"log longer than its bytes", []byte{1, byte(algo.SlidingLog), 0xff, 0xff, 0x3f}},
		{"empty log entry", []byte{1, byte(algo.SlidingLog), 1, 5, 0}},
		{"log out of order", []byte{1, byte(algo.SlidingLog), 2, 5, 1, 0, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s
			if err := r.UnmarshalBinary(c.b); !errors.Is(err, algo.ErrInvalidState) {
				t.Errorf("UnmarshalBinary(%x) error = %v, want ErrInvalidState", c.b, err)
			}
			if !bytes.Equal(encode(t, &r), good) {
				t.Errorf("a failed UnmarshalBinary changed the state")
			}
		})
	}
}

// FuzzStateUnmarshal feeds arbitrary bytes to UnmarshalBinary: it must not
// panic, and a state it accepts must re-encode stably and be usable by
// Decide under every policy.
func FuzzStateUnmarshal(f *testing.F) {
	for _, ps := range allPolicies {
		p := mustParse(f, ps)
		var s algo.State
		for i := range 5 {
			p.Decide(&s, int64(i)*int64(time.Second)/3, 1)
		}
		f.Add(encode(f, &s))
	}
	policies := make([]algo.Policy, len(allPolicies))
	for i, ps := range allPolicies {
		policies[i] = mustParse(f, ps)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var s algo.State
		if err := s.UnmarshalBinary(b); err != nil {
			return
		}
		once := encode(t, &s)
		var r algo.State
		if err := r.UnmarshalBinary(once); err != nil || !bytes.Equal(encode(t, &r), once) {
			t.Fatalf("re-encoding %x: %v", b, err)
		}
		for _, p := range policies {
			c := r
			if _, err := p.Decide(&c, algo.MaxTime, 1); err != nil {
				t.Fatalf("%v: %v", p, err)
			}
		}
	})
}

// Within its window, sliding-window decides an event from before the last
// one at its own time, where the previous window weighs more: stricter than
// deciding it at the last event's time.
func TestSlidingWindowBackwardsWithinWindow(t *testing.T) {
	p := mustParse(t, "sliding-window 10/1s")
	var s algo.State
	ms := time.Millisecond
	decide(t, p, &s, 0, 10)
	if d := decide(t, p, &s, 1500*ms, 4); !d.Allowed { // est = 10*0.5 + 4 = 9
		t.Fatalf("at 1.5s: %+v", d)
	}
	// At 1.2s, est = 10*0.8 + 4 = 12: denied until 1.5s.
	want := algo.Decision{Allowed: false, Remaining: 0, RetryAfter: 300 * ms, ResetAfter: 1800 * ms}
	if d := decide(t, p, &s, 1200*ms, 1); d != want {
		t.Errorf("at 1.2s: %+v, want %+v", d, want)
	}
}

// Denials and peeks write no memory (Decide's doc): run concurrently on
// one State and on copies of it, which share a sliding log's entries,
// under -race, they race with nothing and leave the State as it was.
// redisstore's deny cache relies on this promise.
func TestDenialsWriteNothing(t *testing.T) {
	for _, text := range allPolicies {
		t.Run(text, func(t *testing.T) {
			p := algo.MustParsePolicy(text)
			var shared algo.State
			now := int64(time.Hour)
			for i := int64(0); ; i++ { // admit at distinct instants until denied
				if d, _ := p.Decide(&shared, now+i*int64(time.Millisecond), 1); !d.Allowed {
					break
				}
			}
			before := encode(t, &shared)
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 200 {
						st := &shared
						if g%2 == 1 {
							cp := shared // a copy: shares a sliding log's entries
							st = &cp
						}
						at := now + int64(i)*int64(time.Microsecond)
						if d, _ := p.Decide(st, at, int64(1+i%2)*int64(g%3)); d.Allowed && g%3 != 0 {
							t.Errorf("admitted %+v at %d: the state was full", d, at)
						}
					}
				}()
			}
			wg.Wait()
			if after := encode(t, &shared); !bytes.Equal(after, before) {
				t.Errorf("denials and peeks changed the state:\n%x\n%x", before, after)
			}
		})
	}
}
