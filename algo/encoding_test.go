package algo_test

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// TestStateEncodingFromMain reads States that the version before MaxLimit
// rose to 10^15 wrote (the file store keeps these bytes as they are): each
// must decode, encode back to the same bytes and decide as it did then.
// Policies whose counts fit in 32 bits keep their encoding byte for byte.
func TestStateEncodingFromMain(t *testing.T) {
	now := int64(1_764_000_000)*int64(time.Second) + 2*int64(time.Second)
	for _, c := range []struct {
		policy, stored string
		want           algo.Decision // of a cost of 1 at now
	}{
		{"token-bucket 3/1s burst=5", "0101d59a8cbafb94bfbd180100", algo.Decision{Allowed: true, Remaining: 4, ResetAfter: 333333334}},
		{"leaky-bucket 1000000000/8784h capacity=999999999", "0102aab387ecf3a1d5f5180000", algo.Decision{Allowed: true, Remaining: 49, ResetAfter: 31622398413687466}},
		{"sliding-log 5/1m", "0103038080a8bef694bfbd1802d586f99e0101ab8df2bd0201", algo.Decision{Allowed: true, ResetAfter: 60000000000}},
		{"sliding-window 1000000000/1s", "01048094939bfa94bfbd1801f993ebdc03", algo.Decision{Allowed: true, Remaining: 999999998, ResetAfter: 2000000000}},
		{"fixed-window 1000000000/2s", "01058080a8bef694bfbd18fa93ebdc0300", algo.Decision{Allowed: true, Remaining: 999999999, ResetAfter: 2000000000}},
	} {
		t.Run(c.policy, func(t *testing.T) {
			p := mustParse(t, c.policy)
			b, err := hex.DecodeString(c.stored)
			if err != nil {
				t.Fatal(err)
			}
			var s algo.State
			if err := s.UnmarshalBinary(b); err != nil {
				t.Fatalf("UnmarshalBinary(%s): %v", c.stored, err)
			}
			if got := hex.EncodeToString(encode(t, &s)); got != c.stored {
				t.Errorf("encodes back to %s, want %s", got, c.stored)
			}
			if _, ok := s.Cell(); ok != p.Compact() {
				t.Errorf("Cell ok = %v, Compact = %v", ok, p.Compact())
			}
			if d, err := p.Decide(&s, now, 1); err != nil || d != c.want {
				t.Errorf("Decide = %+v, %v; want %+v", d, err, c.want)
			}
		})
	}
}
