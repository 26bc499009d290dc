// Package valuetext checks values as people write them in flags,
// environment variables and configuration files, with errors that say
// what is expected in their words: "5" is not a duration; write it with
// a unit, e.g. 5s. The errors name the value, not the setting: the
// caller adds that.
package valuetext

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Whole checks that s is a whole number written in decimal digits, with
// an optional sign, that fits in 64 bits. Go's own parsers take 0x5 and
// 1_000 too; people mean those rarely, and mistype them more often.
func Whole(s string) error {
	_, err := strconv.ParseInt(s, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return fmt.Errorf("%s is too large", quote(s))
	case err != nil:
		return fmt.Errorf("%s is not a whole number", quote(s))
	}
	return nil
}

// Duration checks that s is a duration: numbers each with a unit (ns, us,
// ms, s, m, h), such as 500ms or 1m30s.
func Duration(s string) error {
	if _, err := time.ParseDuration(s); err == nil {
		return nil
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return fmt.Errorf("%s is not a duration; write it with a unit, e.g. %sms or %ss", quote(s), s, s)
	}
	return fmt.Errorf("%s is not a duration; write a number and a unit (ns, us, ms, s, m, h), e.g. 500ms or 1m30s", quote(s))
}

// Bool checks that s is true or false (or 1, 0, t, f, TRUE, False and
// the other spellings of strconv.ParseBool).
func Bool(s string) error {
	if _, err := strconv.ParseBool(s); err != nil {
		return fmt.Errorf("%s is not true or false", quote(s))
	}
	return nil
}

// quote quotes s, cut to 64 bytes, for an error message.
func quote(s string) string { return fmt.Sprintf("%.64q", s) }
