package frontend

import (
	"errors"
	"fmt"
	"testing"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
)

func TestLimitName(t *testing.T) {
	byPolicy := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m")))
	named := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithName("api")))
	taken := map[string]bool{}
	var got []string
	for _, tc := range []struct {
		name string
		l    *floodgate.Limiter
	}{{"", byPolicy}, {"", named}, {"", named}, {"x", byPolicy}, {"", byPolicy}} {
		got = append(got, LimitName(tc.name, tc.l, taken))
	}
	if want := "[default api api-2 x default-2]"; fmt.Sprint(got) != want {
		t.Errorf("names %s, want %s", fmt.Sprint(got), want)
	}
}

func TestBinding(t *testing.T) {
	ds := []floodgate.Decision{{Allowed: true, Remaining: 5}, {Allowed: true, Remaining: 2}, {Allowed: true, Remaining: 3}}
	if b := Binding(&floodgate.MultiDecision{Allowed: true, Denied: -1, Decisions: ds}); b != 1 {
		t.Errorf("admitted: binding %d, want 1, the least remaining", b)
	}
	if b := Binding(&floodgate.MultiDecision{Denied: 2, Decisions: ds}); b != 2 {
		t.Errorf("denied by 2: binding %d", b)
	}
}

func TestFirstOf(t *testing.T) {
	none := func(int) (string, error) { return "", ErrNoKey }
	some := func(int) (string, error) { return "k", nil }
	broken := errors.New("broken")
	if k, err := FirstOf("p", []func(int) (string, error){none, some})(0); k != "1:k" || err != nil {
		t.Errorf("FirstOf(none, some) = %q, %v; want 1:k", k, err)
	}
	if _, err := FirstOf("p", []func(int) (string, error){func(int) (string, error) { return "", broken }, some})(0); err != broken {
		t.Errorf("a broken function: %v, want it at once", err)
	}
	if _, err := FirstOf[int]("p", nil)(0); !errors.Is(err, ErrNoKey) {
		t.Errorf("FirstOf of none: %v", err)
	}
}
