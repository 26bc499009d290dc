package trace

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/algo"
)

func TestParseSeconds(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"-0", 0},
		{"-0.000e5", 0},
		{"00", 0},
		{"12", 12e9},
		{"012", 12e9},
		{"12.345", 12_345_000_000},
		{"0.5", 5e8},
		{"0.000000001", 1},
		{"1.000000000", 1e9},
		{"1.5e3", 1_500_000_000_000},
		{"1.5E+3", 1_500_000_000_000},
		{"15e-1", 1_500_000_000},
		{"1e-9", 1},
		{"1e9", 1e18},
		{"0.0000000004", 0},                 // rounds down
		{"0.0000000005", 1},                 // half: away from zero
		{"0.00000000049999999999999999", 0}, // just under half
		{"0.0000000014999", 1},
		{"2.0000000025", 2_000_000_003},
		{"1e-10", 0},
		{"1e-99999999999999999999", 0},
		{"0e99999999999999999999", 0},
		{"0.1e1", 1e9},
		{"4611686018.427387904", algo.MaxTime},
		{"4611686018.4273879044", algo.MaxTime}, // rounds down to MaxTime
		{"4611686018427387904e-9", algo.MaxTime},
		{"0.000000000000000000000000000000000000000001e42", 1e9},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSeconds(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("ParseSeconds(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseSecondsErrors(t *testing.T) {
	const syntax = `: invalid number (want seconds like 12.5, 0.001 or 1.5e3)`
	const rng = `: out of range (want 0 to 4611686018.427387904 seconds)`
	tests := []struct {
		in   string
		want error
		msg  string
	}{
		{"", ErrNumber, `""` + syntax},
		{"abc", ErrNumber, `"abc"` + syntax},
		{"1.", ErrNumber, `"1."` + syntax},
		{".5", ErrNumber, `".5"` + syntax},
		{"+1", ErrNumber, `"+1"` + syntax},
		{"1e", ErrNumber, `"1e"` + syntax},
		{"1e+", ErrNumber, `"1e+"` + syntax},
		{"1.2.3", ErrNumber, `"1.2.3"` + syntax},
		{"1 ", ErrNumber, `"1 "` + syntax},
		{"0x10", ErrNumber, `"0x10"` + syntax},
		{"1_000", ErrNumber, `"1_000"` + syntax},
		{"Inf", ErrNumber, `"Inf"` + syntax},
		{"NaN", ErrNumber, `"NaN"` + syntax},
		{"--1", ErrNumber, `"--1"` + syntax},
		{"١", ErrNumber, `"١"` + syntax}, // an Arabic-Indic digit
		{"-1", ErrRange, `"-1"` + rng},
		{"-1e-20", ErrRange, `"-1e-20"` + rng}, // negative, though it rounds to 0
		{"4611686018.4273879045", ErrRange, `"4611686018.4273879045"` + rng},
		{"4611686019", ErrRange, `"4611686019"` + rng},
		{"1e10", ErrRange, `"1e10"` + rng},
		{"99999999999999999999", ErrRange, `"99999999999999999999"` + rng},
		{"1e99999999999999999999", ErrRange, `"1e99999999999999999999"` + rng},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSeconds(tt.in)
			if !errors.Is(err, tt.want) || err.Error() != tt.msg {
				t.Errorf("ParseSeconds(%q) = %d, %v; want %q (%v)", tt.in, got, err, tt.msg, tt.want)
			}
		})
	}
}

func TestParseCount(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"0", 0, ""},
		{"-0", 0, ""},
		{"1", 1, ""},
		{"007", 7, ""},
		{"2.0", 2, ""},
		{"2e0", 2, ""},
		{"2.500e3", 2500, ""},
		{"1500e-3", 0, `"1500e-3": invalid number (want a whole number like 1 or 2e0)`},
		{"1.5", 0, `"1.5": invalid number (want a whole number like 1 or 2e0)`},
		{"1e-30", 0, `"1e-30": invalid number (want a whole number like 1 or 2e0)`},
		{"9223372036854775807", math.MaxInt64, ""},
		{"9223372036854775807.0", math.MaxInt64, ""},
		{"9223372036854775808", 0, `"9223372036854775808": out of range (want 0 to 9223372036854775807)`},
		{"1e19", 0, `"1e19": out of range (want 0 to 9223372036854775807)`},
		{"-1", 0, `"-1": out of range (want 0 to 9223372036854775807)`},
		{"-0.5", 0, `"-0.5": out of range (want 0 to 9223372036854775807)`},
		{"x", 0, `"x": invalid number (want a whole number like 1 or 2e0)`},
		{"", 0, `"": invalid number (want a whole number like 1 or 2e0)`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseCount(tt.in)
			var msg string
			if err != nil {
				msg = err.Error()
			}
			if got != tt.want || msg != tt.err {
				t.Errorf("parseCount(%q) = %d, %q; want %d, %q", tt.in, got, msg, tt.want, tt.err)
			}
		})
	}
}

func TestAppendSeconds(t *testing.T) {
	tests := []struct {
		ns   int64
		want string
	}{
		{0, "0"},
		{1, "0.000000001"},
		{5e8, "0.5"},
		{43e9, "43"},
		{12_345_000_000, "12.345"},
		{1_000_000_001, "1.000000001"},
		{algo.MaxTime, "4611686018.427387904"},
		{math.MaxInt64, "9223372036.854775807"},
		{-1, "-0.000000001"},
		{-1e9, "-1"},
		{math.MinInt64, "-9223372036.854775808"},
	}
	for _, tt := range tests {
		if got := string(AppendSeconds([]byte("x"), tt.ns)); got != "x"+tt.want {
			t.Errorf("AppendSeconds(%d) = %q, want %q", tt.ns, got, "x"+tt.want)
		}
	}
}

// FuzzParseSeconds checks ParseSeconds against exact rational arithmetic,
// and that AppendSeconds writes every value it accepts back in a form it
// reads back to the same value.
func FuzzParseSeconds(f *testing.F) {
	for _, s := range []string{"0", "12.345", "1.5e3", "0.0000000005", "-0", "4611686018.427387904", "1e-9", "1E+2", "abc", "1."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, err := ParseSeconds(s)
		if err != nil {
			if !errors.Is(err, ErrNumber) && !errors.Is(err, ErrRange) {
				t.Fatalf("ParseSeconds(%q): %v wraps neither ErrNumber nor ErrRange", s, err)
			}
			return
		}
		if ns < 0 || ns > algo.MaxTime {
			t.Fatalf("ParseSeconds(%q) = %d, out of [0, MaxTime]", s, ns)
		}
		text := string(AppendSeconds(nil, ns))
		if back, err := ParseSeconds(text); back != ns || err != nil {
			t.Fatalf("ParseSeconds(%q) = %d; AppendSeconds gives %q, which parses to %d, %v", s, ns, text, back, err)
		}
		if strings.ContainsAny(text, "eE-") || strings.HasSuffix(text, ".") || strings.Contains(text, ".") && strings.HasSuffix(text, "0") {
			t.Fatalf("AppendSeconds(%d) = %q, not canonical", ns, text)
		}
		// Exact reference, for exponents small enough for math/big.
		if _, exp, _ := strings.Cut(strings.ToLower(s), "e"); len(strings.TrimLeft(exp, "+-")) > 3 {
			return
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("ParseSeconds accepted %q, which math/big rejects", s)
		}
		r.Abs(r.Mul(r, big.NewRat(1e9, 1)))
		q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
		if m.Lsh(m, 1).Cmp(r.Denom()) >= 0 {
			q.Add(q, big.NewInt(1))
		}
		if !q.IsInt64() || q.Int64() != ns {
			t.Fatalf("ParseSeconds(%q) = %d, want %v", s, ns, q)
		}
	})
}
