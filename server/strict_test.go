package server

import (
	"strings"
	"testing"
)

func TestStrictBodyAccepts(t *testing.T) {
	for _, body := range []string{
		`{"policy":"global","key":"k"}`,
		`{"policy":"global","key":"\ud83d\ude00"}`, // a surrogate pair: one character
		`{"policy":"global","key":"k\\udc80"}`,     // a backslash, then "udc80"
		`{"policy":"global","key":"\"\\\"\u00e9"}`,
		`{"policy":"global","key":"é 日本"}`,
		`{"checks":[{"policy":"a","key":"k"},{"policy":"a","key":"k"}]}`, // the same fields in two objects
		`{"policy":"global","key":"Key"}`,                                // values may have any case
		`not json`,                                                       // left to the decoder, which says where
	} {
		if err := strictBody([]byte(body)); err != nil {
			t.Errorf("strictBody(%s) = %v, want nil", body, err)
		}
	}
}

func FuzzStrictBody(f *testing.F) {
	for _, s := range []string{`{"a":"\ud800"}`, `{"a":1,"a":2}`, `{"A":[{"b":"\u"}]}`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_ = strictBody(body) // must not panic, nor hang
	})
}

func TestStrictBodyRefusesDeepNesting(t *testing.T) {
	deep := strings.Repeat("[", 17) + strings.Repeat("]", 17)
	for _, body := range []string{
		`{"checks":` + deep + `}`,
		strings.Repeat("[", 1<<20), // a hostile body: a million levels, never closed
		strings.Repeat(`{"a":`, 17),
	} {
		err := strictBody([]byte(body))
		if err == nil || !strings.Contains(err.Error(), "nests arrays and objects deeper than 16 levels") {
			t.Errorf("strictBody(%.40s…) = %v, want the nesting refused", body, err)
		}
	}
	ok := strings.Repeat("[", 16) + strings.Repeat("]", 16)
	inString := `{"key":"` + strings.Repeat("[", 100) + `"}` // brackets in a string do not nest
	for _, body := range []string{ok, inString, `{"key":"\"[[[[[[[[[[[[[[[[[[[[[["}`} {
		if err := strictBody([]byte(body)); err != nil {
			t.Errorf("strictBody(%.40s…) = %v, want nil", body, err)
		}
	}
}
