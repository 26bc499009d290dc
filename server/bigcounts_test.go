package server

import (
	"errors"
	"strings"
	"testing"
)

// A configuration's policies take counts up to 10^15 (a 10 Gbit/s link's
// bytes), and one past it is refused with the parser's reason.
func TestConfigLargeCounts(t *testing.T) {
	c, err := ParseConfig([]byte("policies: {bytes: token-bucket 1250000000/1s burst=4294967296}"), "")
	if err != nil {
		t.Fatal(err)
	}
	nps, err := c.policies()
	if err != nil || len(nps) != 1 || nps[0].policy.Burst() != 1<<32 {
		t.Fatalf("policies() = %+v, %v", nps, err)
	}
	_, err = ParseConfig([]byte("policies: {over: fixed-window 1000000000000001/1s}"), "")
	if want := "limit 1000000000000001 is more than 1000000000000000"; !errors.Is(err, ErrInvalidConfig) || err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a LIMIT past 10^15: %v; want ErrInvalidConfig and %q", err, want)
	}
}
