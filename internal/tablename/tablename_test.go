package tablename

import (
	"testing"

	"github.com/floodgate/floodgate/algo"
)

func TestOfAndPolicyOf(t *testing.T) {
	p, err := algo.ParsePolicy("token-bucket 5/1s burst=10")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, want string }{
		{p.String(), "token-bucket 5/1s burst=10"},
		{"api", "api@token-bucket 5/1s burst=10"},
		{"{user}:a@b%", "%7Buser%7D%3Aa%40b%25@token-bucket 5/1s burst=10"},
	} {
		got := Of(tt.name, p)
		if got != tt.want {
			t.Errorf("Of(%q) = %q, want %q", tt.name, got, tt.want)
		}
		if q, ok := PolicyOf(got); !ok || q != p {
			t.Errorf("PolicyOf(%q) = %v, %v; want %v", got, q, ok, p)
		}
	}
	for _, bad := range []string{"", "api", "api@nope 1/1s", "api@token-bucket 5/1s burst=010", "%floodgate"} {
		if q, ok := PolicyOf(bad); ok {
			t.Errorf("PolicyOf(%q) = %v, want none", bad, q)
		}
	}
}
