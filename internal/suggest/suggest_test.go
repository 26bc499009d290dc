package suggest_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/suggest"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"policies", "policies", 0},
		{"polices", "policies", 1}, // a deletion
		{"polciy", "policy", 2},    // a swap is two replacements
		{"timout", "timeout", 1},   // an insertion
		{"kitten", "sitting", 3},   // the textbook case
		{"store", "stores", 1},     //
		{strings.Repeat("a", 65), "a", math.MaxInt},
	} {
		if got := suggest.Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := suggest.Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	known := []string{"policies", "limits", "auth", "tls", "store", "snapshot", "ops"}
	for _, tc := range []struct{ name, want string }{
		{"polices", "policies"},
		{"Policies", "policies"}, // case is ignored
		{"stor", "store"},
		{"snapshots", "snapshot"},
		{"tsl", "tls"},         // two edits: still a suggestion
		{"database", ""},       // nothing close
		{"authentication", ""}, // a prefix is not close
	} {
		if got := suggest.Closest(tc.name, known); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := suggest.Closest("ab", []string{"ax", "xb"}); got != "ax" {
		t.Errorf("Closest of a tie = %q, want the first, %q", got, "ax")
	}
}

func ExampleClosest() {
	flags := []string{"policy", "limit", "cost", "store"}
	fmt.Println(suggest.Closest("polcy", flags))
	fmt.Printf("%q\n", suggest.Closest("verbose", flags))
	// Output:
	// policy
	// ""
}
