package reference

import (
	"math/big"
	"testing"
)

// Hand-worked vectors: each expected value was computed on paper from the
// definitions in the package documentation, so that the model itself is
// checked before it is used to check anything else. Durations are exact
// rationals in ns ("5000000000/3"); retry "never" marks a cost above burst.
func TestHandWorked(t *testing.T) {
	const ms, s = 1_000_000, 1_000_000_000
	type step struct {
		t, n      int64
		allowed   bool
		remaining int64
		retry     string
		reset     string
	}
	tests := []struct {
		name                 string
		alg                  string
		limit, period, burst int64
		steps                []step
	}{
		{"token-bucket 3/1s burst=5", TokenBucket, 3, s, 5, []step{
			{0, 5, true, 0, "0", "5000000000/3"},
			{0, 1, false, 0, "1000000000/3", "5000000000/3"},
			{333333334, 1, true, 0, "0", "1666666666"},
			{s, 0, true, 2, "0", "1000000000"},
			{s, 6, false, 2, "never", "1000000000"},
			{3 * s, 0, true, 5, "0", "0"},
		}},
		{"token-bucket 7/2 burst=7", TokenBucket, 7, 2 * s, 0, []step{
			{0, 7, true, 0, "0", "2000000000"},
			{1, 1, false, 0, "2000000000/7 - 1", "1999999999"},
			{285714286, 1, true, 0, "0", "2000000000/7*8 - 285714286"},
		}},
		{"leaky-bucket 7/2s capacity=3", LeakyBucket, 7, 2 * s, 3, []step{
			{0, 3, true, 0, "0", "6000000000/7"},
			{0, 1, false, 0, "2000000000/7", "6000000000/7"},
			{285714286, 1, true, 0, "0", "(3 - 7/2000000000*285714286 + 1)*2000000000/7"},
			{10 * s, 0, true, 3, "0", "0"},
			{10 * s, 4, false, 3, "never", "0"},
		}},
		{"sliding-log 5/60", SlidingLog, 5, 60 * s, 0, []step{
			{0, 3, true, 2, "0", "60000000000"},
			{10 * s, 2, true, 0, "0", "60000000000"},
			{20 * s, 1, false, 0, "40000000000", "50000000000"},
			{20 * s, 3, false, 0, "40000000000", "50000000000"},
			{20 * s, 4, false, 0, "50000000000", "50000000000"},
			{60 * s, 3, true, 0, "0", "60000000000"},
			{60 * s, 6, false, 0, "never", "60000000000"},
			{130 * s, 0, true, 5, "0", "0"},
		}},
		{"sliding-window 3/500ms", SlidingWindow, 3, 500 * ms, 0, []step{
			{100 * ms, 3, true, 0, "0", "900000000"},
			{600 * ms, 1, false, 0, "1000000000 - 1000000000/3 - 600000000", "400000000"},
			{666666667, 1, true, 0, "0", "833333333"},
			{700 * ms, 3, false, 0, "1500000000 - 700000000", "800000000"},
			{2 * s, 0, true, 3, "0", "0"},
		}},
		{"fixed-window 7/2", FixedWindow, 7, 2 * s, 0, []step{
			{1500 * ms, 7, true, 0, "0", "500000000"},
			{1900 * ms, 1, false, 0, "100000000", "100000000"},
			{2 * s, 7, true, 0, "0", "2000000000"},
			{2 * s, 8, false, 0, "never", "2000000000"},
			{4 * s, 0, true, 7, "0", "0"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(tt.alg, tt.limit, tt.period, tt.burst)
			for i, st := range tt.steps {
				got := m.Decide(Event{T: st.t, N: st.n})
				wantRetry, wantNever := (*big.Rat)(nil), st.retry == "never"
				if !wantNever {
					wantRetry = evalRat(t, st.retry)
				}
				ok := got.Allowed == st.allowed && got.Remaining == st.remaining &&
					got.Never == wantNever && (wantNever || got.RetryAfter.Cmp(wantRetry) == 0) &&
					got.ResetAfter.Cmp(evalRat(t, st.reset)) == 0
				if !ok {
					t.Errorf("step %d (t=%d n=%d): got %v, want allowed=%v remaining=%d retry=%s reset=%s",
						i, st.t, st.n, got, st.allowed, st.remaining, st.retry, st.reset)
				}
			}
		})
	}
}

// evalRat evaluates a tiny left-to-right expression of rationals joined by
// " + ", " - ", "*" and "/" (no precedence beyond one level: terms joined by
// + and -, each term a product/quotient evaluated left to right, optionally
// one parenthesized group at the front of a term).
func evalRat(t *testing.T, expr string) *big.Rat {
	t.Helper()
	p := &ratParser{s: expr}
	r := p.sum()
	if p.i != len(p.s) {
		t.Fatalf("bad expression %q at %d", expr, p.i)
	}
	return r
}

type ratParser struct {
	s string
	i int
}

func (p *ratParser) skip() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *ratParser) sum() *big.Rat {
	r := p.term()
	for {
		p.skip()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			return r
		}
		op := p.s[p.i]
		p.i++
		u := p.term()
		if op == '+' {
			r = new(big.Rat).Add(r, u)
		} else {
			r = new(big.Rat).Sub(r, u)
		}
	}
}

func (p *ratParser) term() *big.Rat {
	r := p.atom()
	for {
		p.skip()
		if p.i >= len(p.s) || (p.s[p.i] != '*' && p.s[p.i] != '/') {
			return r
		}
		op := p.s[p.i]
		p.i++
		u := p.atom()
		if op == '*' {
			r = new(big.Rat).Mul(r, u)
		} else {
			r = new(big.Rat).Quo(r, u)
		}
	}
}

func (p *ratParser) atom() *big.Rat {
	p.skip()
	if p.i < len(p.s) && p.s[p.i] == '(' {
		p.i++
		r := p.sum()
		p.skip()
		p.i++ // ')'
		return r
	}
	j := p.i
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	r, _ := new(big.Rat).SetString(p.s[j:p.i])
	return r
}

func TestCeilNanos(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int64
	}{{"0", 0}, {"1", 1}, {"1/3", 1}, {"5000000000/3", 1666666667}, {"2/2", 1}, {"9223372036854775807", 9223372036854775807}} {
		r, _ := new(big.Rat).SetString(tt.in)
		if got := CeilNanos(r); got != tt.want {
			t.Errorf("CeilNanos(%s) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
