package ratelimitfields

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dunglas/httpsfv"

	"github.com/floodgate/floodgate/algo"
)

func TestStringRoundTrip(t *testing.T) {
	for _, s := range []string{"default", "", `a"b\c`, "tab\there", "ünï", "~ !#"} {
		got := String(s)
		it, err := httpsfv.UnmarshalItem([]string{got})
		if err != nil {
			t.Errorf("String(%q) = %s: %v", s, got, err)
			continue
		}
		want := strings.Map(func(r rune) rune {
			if r < 0x20 || r > 0x7e {
				return '_'
			}
			return r
		}, s)
		if v, _ := it.Value.(string); len(s) == len([]rune(s)) && v != want {
			t.Errorf("String(%q) = %s, parsed back as %q", s, got, v)
		}
	}
}

func TestQuotaWindow(t *testing.T) {
	for _, tc := range []struct {
		policy string
		q, w   int64
	}{
		{"fixed-window 100/1m", 100, 60},
		{"token-bucket 5/1s burst=20", 5, 1},
		{"sliding-log 10/100ms", 100, 1},
		{"fixed-window 3/1500ms", 4, 2},
	} {
		q, w := QuotaWindow(algo.MustParsePolicy(tc.policy))
		if q != tc.q || w != tc.w {
			t.Errorf("QuotaWindow(%s) = q=%d w=%d, want q=%d w=%d", tc.policy, q, w, tc.q, tc.w)
		}
	}
}

// The items parse as a structured-field List of Items with their
// parameters.
func TestItemsParse(t *testing.T) {
	name := String(`edge "api"`)
	for _, field := range []string{
		string(AppendPolicy(nil, name, 100, 60)) + ", " + string(AppendPolicy(nil, String("b"), 0, 1)),
		string(AppendStanding(nil, name, 42, 30)),
	} {
		l, err := httpsfv.UnmarshalList([]string{field})
		if err != nil {
			t.Errorf("%s: %v", field, err)
			continue
		}
		it := l[0].(httpsfv.Item)
		if it.Value != `edge "api"` || len(it.Params.Names()) != 2 {
			t.Errorf("%s: first item %v %v", field, it.Value, it.Params.Names())
		}
	}
}

func Example() {
	q, w := QuotaWindow(algo.MustParsePolicy("fixed-window 100/1m"))
	name := String("edge")
	fmt.Println(string(AppendPolicy(nil, name, q, w)))
	fmt.Println(string(AppendStanding(nil, name, 42, 30)))
	// Output:
	// "edge";q=100;w=60
	// "edge";r=42;t=30
}
