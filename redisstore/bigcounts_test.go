package redisstore_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/redisstore"
)

// TestStoredValueFromMain puts in Redis the values that the version
// before counts rose to 10^15 wrote (script, state layout and all), then
// decides on them: each decision, and the value written after it, must be
// what that version gave and wrote, byte for byte.
func TestStoredValueFromMain(t *testing.T) {
	c := testClient(t)
	st := newStore(t, c, redisstore.WithPrefix("frommain:"), redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
	ctx := context.Background()
	now := int64(1_764_000_000)*int64(time.Second) + 2*int64(time.Second)
	for _, v := range []struct {
		policy, before, after string
		want                  algo.Decision // of a cost of 1 at now
	}{
		{"token-bucket 3/1s burst=5", "01000040402049da410000005543deb341000000000000f03f0000000000000000",
			"01000080402049da410000005543deb341000000000000f03f0000000000000000", algo.Decision{Allowed: true, Remaining: 4, ResetAfter: 333333334}},
		{"leaky-bucket 1000000000/8784h capacity=999999999", "0200000080c1c1da41000000aad9c5b64100000000000000000000000000000000",
			"0200000080c1c1da41000000aa5ea8b84100000000000000000000000000000000", algo.Decision{Allowed: true, Remaining: 49, ResetAfter: 31622398413687466}},
		{"sliding-window 1000000000/1s", "04000040402049da410000000000000000000000000000f03f000080fc64cdcd41",
			"04000080402049da410000000000000000000000000000f03f000000000000f03f", algo.Decision{Allowed: true, Remaining: 999999998, ResetAfter: 2000000000}},
		{"fixed-window 1000000000/2s", "05000000402049da410000000000000000000000fd64cdcd410000000000000000",
			"05000080402049da410000000000000000000000000000f03f0000000000000000", algo.Decision{Allowed: true, Remaining: 999999999, ResetAfter: 2000000000}},
	} {
		t.Run(v.policy, func(t *testing.T) {
			key := "frommain:t@" + v.policy + ":k"
			before, _ := hex.DecodeString(v.before)
			if err := c.Set(ctx, key, before, time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
			tb, err := st.Table("t", algo.MustParsePolicy(v.policy))
			if err != nil {
				t.Fatal(err)
			}
			if d, err := tb.Decide(ctx, "k", now, 1); err != nil || d != v.want {
				t.Errorf("Decide = %+v, %v; want %+v", d, err, v.want)
			}
			after, err := c.Get(ctx, key).Result()
			if got := hex.EncodeToString([]byte(after)); err != nil || got != v.after {
				t.Errorf("value after: %s, %v; want %s", got, err, v.after)
			}
		})
	}
}
