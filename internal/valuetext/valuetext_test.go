package valuetext_test

import (
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/valuetext"
)

func TestValues(t *testing.T) {
	for _, tc := range []struct {
		check func(string) error
		in    string
		want  string // "" for none
	}{
		{valuetext.Whole, "5", ""},
		{valuetext.Whole, "-5", ""},
		{valuetext.Whole, "0x5", `"0x5" is not a whole number`},
		{valuetext.Whole, "1_000", `"1_000" is not a whole number`},
		{valuetext.Whole, "abc", `"abc" is not a whole number`},
		{valuetext.Whole, "1.5", `"1.5" is not a whole number`},
		{valuetext.Whole, "", `"" is not a whole number`},
		{valuetext.Whole, "99999999999999999999", `"99999999999999999999" is too large`},
		{valuetext.Duration, "1m30s", ""},
		{valuetext.Duration, "0", ""}, // Go's one duration without a unit
		{valuetext.Duration, "100", `"100" is not a duration; write it with a unit, e.g. 100ms or 100s`},
		{valuetext.Duration, "1.5", `"1.5" is not a duration; write it with a unit, e.g. 1.5ms or 1.5s`},
		{valuetext.Duration, "5 min", `"5 min" is not a duration; write a number and a unit (ns, us, ms, s, m, h), e.g. 500ms or 1m30s`},
		{valuetext.Duration, "1d", `"1d" is not a duration; write a number and a unit (ns, us, ms, s, m, h), e.g. 500ms or 1m30s`},
		{valuetext.Bool, "true", ""},
		{valuetext.Bool, "0", ""},
		{valuetext.Bool, "yes", `"yes" is not true or false`},
		{valuetext.Whole, strings.Repeat("x", 100), `"` + strings.Repeat("x", 64) + `" is not a whole number`},
	} {
		err := tc.check(tc.in)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
	}
}
