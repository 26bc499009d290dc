package seconds

import (
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/algo"
)

func TestParse(t *testing.T) {
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
		{"0e99999999999999999999", 0},
		{"1.0000000000000", 1e9}, // trailing zeros are not decimals that count
		{"0.1e1", 1e9},
		{"4611686018.427387904", algo.MaxTime},
		{"4611686018427387904e-9", algo.MaxTime},
		{"0.000000000000000000000000000000000000000001e42", 1e9},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("Parse(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	const syntax = `: invalid number (want seconds like 12.5, 0.001 or 1.5e3)`
	const rng = `: out of range (want 0 to 4611686018.427387904 seconds)`
	const nine = `: invalid number (more than nine decimals: times are whole nanoseconds)`
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
		{"0.0000000005", ErrNumber, `"0.0000000005"` + nine},
		{"2.0000000025", ErrNumber, `"2.0000000025"` + nine},
		{"1e-10", ErrNumber, `"1e-10"` + nine},
		{"1e-99999999999999999999", ErrNumber, `"1e-99999999999999999999"` + nine},
		{"4611686018.4273879044", ErrNumber, `"4611686018.4273879044"` + nine},
		{strings.Repeat("7", 100) + "x", ErrNumber, `"` + strings.Repeat("7", 64) + `..."` + syntax},
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
			got, err := Parse(tt.in)
			if !errors.Is(err, tt.want) || err.Error() != tt.msg {
				t.Errorf("Parse(%q) = %d, %v; want %q (%v)", tt.in, got, err, tt.msg, tt.want)
			}
		})
	}
}

func TestParseCount(t *testing.T) {
	const whole = `: invalid number (want a whole number like 1 or 2e0)`
	const rng = `: out of range (want 0 to 9223372036854775807)`
	tests := []struct {
		in   string
		want int64
		is   error // nil: no error
		err  string
	}{
		{"0", 0, nil, ""},
		{"-0", 0, nil, ""},
		{"1", 1, nil, ""},
		{"007", 7, nil, ""},
		{"2.0", 2, nil, ""},
		{"2e0", 2, nil, ""},
		{"2.500e3", 2500, nil, ""},
		{"1500e-3", 0, ErrNumber, `"1500e-3"` + whole},
		{"1.5", 0, ErrNumber, `"1.5"` + whole},
		{"1e-30", 0, ErrNumber, `"1e-30"` + whole},
		{"9223372036854775807", math.MaxInt64, nil, ""},
		{"9223372036854775807.0", math.MaxInt64, nil, ""},
		{"9223372036854775808", 0, ErrRange, `"9223372036854775808"` + rng},
		{"1e19", 0, ErrRange, `"1e19"` + rng},
		{"-1", 0, ErrRange, `"-1"` + rng},
		{"-0.5", 0, ErrRange, `"-0.5"` + rng},
		{"x", 0, ErrNumber, `"x"` + whole},
		{"", 0, ErrNumber, `""` + whole},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCount(tt.in)
			var msg string
			if err != nil {
				msg = err.Error()
			}
			if got != tt.want || msg != tt.err || !errors.Is(err, tt.is) {
				t.Errorf("ParseCount(%q) = %d, %q; want %d, %q (%v)", tt.in, got, msg, tt.want, tt.err, tt.is)
			}
		})
	}
}

func TestAppend(t *testing.T) {
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
		t.Run(tt.want, func(t *testing.T) {
			if got := string(Append([]byte("x"), tt.ns)); got != "x"+tt.want {
				t.Errorf("Append(%d) = %q, want %q", tt.ns, got, "x"+tt.want)
			}
		})
	}
}

// FuzzParse checks Parse against exact rational arithmetic, and that
// Append writes every value it accepts in a canonical form that Parse
// reads back to the same value.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "12.345", "1.5e3", "0.0000000005", "-0", "4611686018.427387904", "1e-9", "1E+2", "abc", "1."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ns, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrNumber) && !errors.Is(err, ErrRange) {
				t.Fatalf("Parse(%q): %v wraps neither ErrNumber nor ErrRange", s, err)
			}
			return
		}
		if ns < 0 || ns > algo.MaxTime {
			t.Fatalf("Parse(%q) = %d, out of [0, MaxTime]", s, ns)
		}
		text := string(Append(nil, ns))
		if back, err := Parse(text); back != ns || err != nil {
			t.Fatalf("Parse(%q) = %d; Append gives %q, which parses to %d, %v", s, ns, text, back, err)
		}
		if !canonical(text) {
			t.Fatalf("Append(%d) = %q, not canonical", ns, text)
		}
		// Exact reference, for exponents small enough for math/big.
		if r, ok := rat(t, s); ok {
			if q := nanos(r); !q.IsInt64() || q.Int64() != ns {
				t.Fatalf("Parse(%q) = %d, want %v", s, ns, q)
			}
			if !new(big.Rat).Mul(r, big.NewRat(1e9, 1)).IsInt() {
				t.Fatalf("Parse(%q) = %d: more than nine decimals, accepted", s, ns)
			}
		}
	})
}

// canonical reports whether text is seconds as Append should write them:
// no exponent, no sign, no trailing dot and no trailing zero in a fraction.
func canonical(text string) bool {
	return !strings.ContainsAny(text, "eE-") && !strings.HasSuffix(text, ".") &&
		!(strings.Contains(text, ".") && strings.HasSuffix(text, "0"))
}

// nanos returns |r| seconds in nanoseconds, rounded to the nearest, halves
// away from zero.
func nanos(r *big.Rat) *big.Int {
	r = new(big.Rat).Abs(new(big.Rat).Mul(r, big.NewRat(1e9, 1)))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Lsh(m, 1).Cmp(r.Denom()) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// FuzzAppend checks that Parse reads back every nanosecond count from 0
// to algo.MaxTime that Append writes, and that Append only appends.
func FuzzAppend(f *testing.F) {
	for _, ns := range []int64{0, 1, 5e8, 43e9, 1_000_000_001, algo.MaxTime} {
		f.Add(ns)
	}
	f.Fuzz(func(t *testing.T, ns int64) {
		if ns < 0 {
			ns = -(ns + 1) // 0 to math.MaxInt64
		}
		ns %= algo.MaxTime + 1
		b := Append([]byte("x"), ns)
		if string(b[:1]) != "x" {
			t.Fatalf("Append(%q, %d) = %q, changed what was there", "x", ns, b)
		}
		if back, err := Parse(string(b[1:])); back != ns || err != nil {
			t.Fatalf("Append(%d) = %q, which parses to %d, %v", ns, b[1:], back, err)
		}
	})
}

// FuzzParseCount checks ParseCount against exact rational arithmetic: it
// accepts exactly the whole numbers from 0 to math.MaxInt64 that Parse's
// syntax can write, and returns their value.
func FuzzParseCount(f *testing.F) {
	for _, s := range []string{"0", "-0", "2.0", "2e0", "1.5", "1e-30", "9223372036854775807", "9223372036854775808", "-1", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseCount(s)
		if _, perr := Parse(s); errors.Is(perr, ErrNumber) {
			if !errors.Is(err, ErrNumber) {
				t.Fatalf("ParseCount(%q) = %d, %v; Parse says %v", s, n, err, perr)
			}
			return
		}
		r, ok := rat(t, s)
		if !ok {
			return
		}
		switch want, wantErr := wantCount(r); {
		case wantErr == errEither:
			if !errors.Is(err, ErrNumber) && !errors.Is(err, ErrRange) {
				t.Fatalf("ParseCount(%q) = %d, %v; want an error", s, n, err)
			}
		case wantErr != nil:
			if !errors.Is(err, wantErr) {
				t.Fatalf("ParseCount(%q) = %d, %v; want an error wrapping %v", s, n, err, wantErr)
			}
		case err != nil || n != want:
			t.Fatalf("ParseCount(%q) = %d, %v; want %d", s, n, err, want)
		}
	})
}

// rat reads s, a number in Parse's syntax, with math/big; it reports false
// for an exponent of more than three digits, beyond what math/big can hold.
func rat(t *testing.T, s string) (*big.Rat, bool) {
	if _, exp, _ := strings.Cut(strings.ToLower(s), "e"); len(strings.TrimLeft(exp, "+-")) > 3 {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		t.Fatalf("%q is a number to Parse, but not to math/big", s)
	}
	return r, true
}

// errEither stands for ErrNumber or ErrRange, either being right.
var errEither = errors.New("ErrNumber or ErrRange")

// wantCount returns what ParseCount should make of r: its value, or the
// error it should wrap. A number that is not whole and also negative or
// within 1 of math.MaxInt64 may have either error: rounding decides which.
func wantCount(r *big.Rat) (int64, error) {
	switch {
	case r.IsInt() && r.Sign() >= 0 && r.Num().IsInt64():
		return r.Num().Int64(), nil
	case r.IsInt():
		return 0, ErrRange
	case r.Sign() >= 0 && r.Cmp(new(big.Rat).SetInt64(math.MaxInt64-1)) <= 0:
		return 0, ErrNumber
	}
	return 0, errEither
}
