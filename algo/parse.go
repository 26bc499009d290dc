package algo

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParsePolicy parses the policy string form used everywhere in floodgate:
//
//	ALGORITHM LIMIT/PERIOD [burst=B] [capacity=C]
//
// ALGORITHM is token-bucket, leaky-bucket, sliding-log, sliding-window or
// fixed-window. LIMIT is a whole number of units. PERIOD is a Go duration
// ("500ms", "1s", "1m", "1h30m") or a bare number of seconds ("60", "7",
// "0.5", at most nine decimals). burst= belongs to token-bucket and
// capacity= to leaky-bucket; both default to LIMIT. Fields are separated by
// spaces or tabs. Examples:
//
//	token-bucket 3/1s burst=5
//	leaky-bucket 1/1h capacity=20
//	sliding-log 2/10
//
// An error wraps ErrInvalidPolicy and names the part at fault.
func ParsePolicy(s string) (Policy, error) {
	p, problem := parsePolicy(s)
	if problem != "" {
		return Policy{}, fmt.Errorf("%w %q: %s", ErrInvalidPolicy, clip(s), problem)
	}
	return p, nil
}

// MustParsePolicy is ParsePolicy for policies written in the program, as
// regexp.MustCompile is for expressions: it panics on an error. Parse
// policies from input with ParsePolicy.
func MustParsePolicy(s string) Policy {
	p, err := ParsePolicy(s)
	if err != nil {
		panic("algo: " + err.Error())
	}
	return p
}

func parsePolicy(s string) (Policy, string) {
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return Policy{}, "want ALGORITHM LIMIT/PERIOD [burst=B] [capacity=C]"
	}
	alg := algorithmByName(fields[0])
	if alg == 0 {
		return Policy{}, fmt.Sprintf("unknown algorithm %q (want token-bucket, leaky-bucket, sliding-log, sliding-window or fixed-window)", clip(fields[0]))
	}
	limitText, periodText, ok := strings.Cut(fields[1], "/")
	if !ok {
		return Policy{}, fmt.Sprintf("rate %q is not LIMIT/PERIOD", clip(fields[1]))
	}
	limit, problem := parseCount("limit", limitText)
	if problem != "" {
		return Policy{}, problem
	}
	period, problem := parsePeriod(periodText)
	if problem != "" {
		return Policy{}, problem
	}
	var burst int64
	var seen string
	for _, opt := range fields[2:] {
		name, value, ok := strings.Cut(opt, "=")
		switch {
		case !ok:
			return Policy{}, fmt.Sprintf("option %q is not NAME=VALUE", clip(opt))
		case name != "burst" && name != "capacity":
			return Policy{}, fmt.Sprintf("unknown option %q (want burst= or capacity=)", clip(name))
		case name != burstName(alg) || !alg.isBucket():
			return Policy{}, fmt.Sprintf("%s= does not apply to %v (burst= is for token-bucket, capacity= for leaky-bucket)", name, alg)
		case seen != "":
			return Policy{}, fmt.Sprintf("option %s= given twice", name)
		}
		seen = name
		if burst, problem = parseCount(name, value); problem != "" {
			return Policy{}, problem
		}
	}
	return newPolicy(alg, limit, period, burst)
}

func algorithmByName(name string) Algorithm {
	for a, n := range algorithmNames {
		if n != "" && n == name {
			return Algorithm(a)
		}
	}
	return 0
}

// parseCount parses a LIMIT, burst or capacity: decimal digits only, at
// least 1, at most MaxLimit.
func parseCount(what, s string) (int64, string) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Sprintf("%s %q is not a whole number", what, clip(s))
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil || n > MaxLimit:
		return 0, fmt.Sprintf("%s %s is more than %d", what, s, MaxLimit)
	case n < 1:
		return 0, fmt.Sprintf("%s %s is less than 1", what, s)
	}
	return n, ""
}

// parsePeriod parses a Go duration or a bare number of seconds.
func parsePeriod(s string) (time.Duration, string) {
	var d time.Duration
	var err error
	if s != "" && strings.TrimLeft(s, "0123456789.") == "" {
		// A bare number of seconds: exact as a Go duration in s, once
		// sub-nanosecond digits (which ParseDuration would drop) are ruled out.
		whole, frac, _ := strings.Cut(s, ".")
		if len(whole) > 9 {
			return 0, fmt.Sprintf("period %s is longer than 366 days", s)
		}
		if d, err = time.ParseDuration(s + "s"); err != nil || len(frac) > 9 {
			return 0, fmt.Sprintf("period %q is not a number of seconds with at most nine decimals", clip(s))
		}
	} else if d, err = time.ParseDuration(s); err != nil {
		if strings.HasSuffix(s, "d") || strings.HasSuffix(s, "w") || strings.HasSuffix(s, "y") {
			return 0, fmt.Sprintf("period %q is not a Go duration (the largest unit is h: 1d is 24h)", clip(s))
		}
		return 0, fmt.Sprintf("period %q is not a Go duration (500ms, 1s, 1m, 1h) or a number of seconds", clip(s))
	}
	switch {
	case d <= 0:
		return 0, fmt.Sprintf("period %s is not positive", s)
	case d > MaxPeriod:
		return 0, fmt.Sprintf("period %s is longer than 366 days", s)
	}
	return d, ""
}

// clipAt is the most of a policy, or of one of its words, that an error
// quotes.
const clipAt = 64

// clip returns s, or its first clipAt bytes and "..." when longer: a bad
// policy may be a whole line of a configuration file or a request.
func clip(s string) string {
	if len(s) <= clipAt {
		return s
	}
	return s[:clipAt] + "..."
}
