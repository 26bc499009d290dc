package seconds

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/algo"
)

// Parse parses a decimal number of seconds exactly into nanoseconds,
// without going through a float64: an optional minus sign, digits, an
// optional fraction of at least one digit and an optional exponent (e or
// E, an optional sign, digits), as in "12", "12.345", "0.000000001" or
// "1.5e3". Leading zeros are allowed. A value with more than nine
// decimals is refused (ErrNumber), as a policy's period is: floodgate's
// times are whole nanoseconds, and rounding would move an event silently.
// Trailing zeros do not count: "1.0000000000" is 1 s.
//
// The result must be from 0 to algo.MaxTime; "-0" is 0, but any other
// negative value is out of range even when it rounds to 0. An error wraps
// ErrNumber for bad syntax and ErrRange for a value out of range.
func Parse(s string) (int64, error) {
	d, ok := parseDecimal(s)
	if !ok {
		return 0, fmt.Errorf("%q: %w (want seconds like 12.5, 0.001 or 1.5e3)", clip(s), ErrNumber)
	}
	ns, exact, ok := d.scale(9, algo.MaxTime)
	switch {
	case !ok || d.neg && d.digits != "":
		return 0, fmt.Errorf("%q: %w (want 0 to %s seconds)", clip(s), ErrRange, maxTimeText)
	case !exact:
		return 0, fmt.Errorf("%q: %w (more than nine decimals: times are whole nanoseconds)", clip(s), ErrNumber)
	}
	return ns, nil
}

// clipAt is the most of a bad number that an error quotes.
const clipAt = 64

// clip returns s, or its first clipAt bytes and "..." when longer, for an
// error message: a bad token may be a whole line.
func clip(s string) string {
	if len(s) <= clipAt {
		return s
	}
	return s[:clipAt] + "..."
}

var maxTimeText = string(Append(nil, algo.MaxTime))

// ParseCount parses a count, such as a cost written beside a time in
// seconds: a whole number from 0 to math.MaxInt64 in the syntax of Parse,
// so that "2", "2.0" and "2e0" are all 2. "1.5" and "1e-30" are not whole
// and wrap ErrNumber; "-0" is 0, and any other negative value wraps
// ErrRange.
func ParseCount(s string) (int64, error) {
	d, ok := parseDecimal(s)
	if !ok {
		return 0, fmt.Errorf("%q: %w (want a whole number like 1 or 2e0)", clip(s), ErrNumber)
	}
	n, exact, ok := d.scale(0, math.MaxInt64)
	switch {
	case !ok || d.neg && d.digits != "":
		return 0, fmt.Errorf("%q: %w (want 0 to %d)", clip(s), ErrRange, int64(math.MaxInt64))
	case !exact:
		return 0, fmt.Errorf("%q: %w (want a whole number like 1 or 2e0)", clip(s), ErrNumber)
	}
	return n, nil
}

// Append appends ns nanoseconds to b as decimal seconds, the form Parse
// reads back exactly: no exponent, the fraction's trailing zeros trimmed
// and no trailing dot, as in "43", "0.5", "0.000000001" and "0". A
// negative ns gets a leading minus sign (Parse refuses it); every int64,
// math.MinInt64 included, is written exactly.
func Append(b []byte, ns int64) []byte {
	u := uint64(ns)
	if ns < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/1e9, 10)
	frac := u % 1e9
	if frac == 0 {
		return b
	}
	var digits [10]byte // a leading 1 keeps the fraction's leading zeros
	strconv.AppendUint(digits[:0], frac+1e9, 10)
	b = append(b, '.')
	return append(b, strings.TrimRight(string(digits[1:]), "0")...)
}

// decimal is a number read from text: digits × 10^exp, with the digits'
// leading zeros dropped (so "" is zero).
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

// maxExp bounds the exponent while it is read; beyond it every number that
// fits in memory is either 0 or out of range after scaling.
const maxExp = 1 << 50

// parseDecimal reads [-]DIGITS[.DIGITS][(e|E)[+|-]DIGITS].
func parseDecimal(s string) (decimal, bool) {
	var d decimal
	if strings.HasPrefix(s, "-") {
		d.neg, s = true, s[1:]
	}
	whole, s := leadingDigits(s)
	if whole == "" {
		return decimal{}, false
	}
	var frac string
	if strings.HasPrefix(s, ".") {
		if frac, s = leadingDigits(s[1:]); frac == "" {
			return decimal{}, false
		}
	}
	if s != "" && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		neg := strings.HasPrefix(s, "-")
		if neg || strings.HasPrefix(s, "+") {
			s = s[1:]
		}
		var exp string
		if exp, s = leadingDigits(s); exp == "" {
			return decimal{}, false
		}
		for _, c := range exp {
			d.exp = min(d.exp*10+int64(c-'0'), maxExp)
		}
		if neg {
			d.exp = -d.exp
		}
	}
	if s != "" {
		return decimal{}, false
	}
	d.digits = strings.TrimLeft(whole+frac, "0")
	d.exp -= int64(len(frac))
	return d, true
}

// leadingDigits splits s after its leading ASCII digits.
func leadingDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return s[:i], s[i:]
}

// scale returns the magnitude of d × 10^shift rounded to a whole number,
// halves away from zero; exact reports whether no rounding was needed, and
// ok whether the result is at most limit.
func (d decimal) scale(shift int, limit int64) (v int64, exact, ok bool) {
	n := int64(len(d.digits))
	if n == 0 {
		return 0, true, true
	}
	e := d.exp + int64(shift)
	keep := n + e // digits before the decimal point
	if keep > 19 {
		return 0, false, false // at least 10^19, more than any int64
	}
	var u uint64
	for i := range min(keep, n) {
		u = u*10 + uint64(d.digits[i]-'0')
	}
	for range max(e, 0) {
		u *= 10
	}
	exact = true
	if keep < n {
		exact = strings.TrimRight(d.digits[max(keep, 0):], "0") == ""
		if keep >= 0 && d.digits[keep] >= '5' { // the first dropped digit
			u++
		}
	}
	if u > uint64(limit) {
		return 0, exact, false
	}
	return int64(u), exact, true
}
