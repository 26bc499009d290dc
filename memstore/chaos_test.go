package memstore_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/memstore"
)

// TestChaosKeyFlood floods a small store with new keys at costs from 1 to
// the burst, interleaved with a victim key that is at its limit. Every
// admission, of the victim and of every flood key, is checked against the
// key's exact state: a store that forgets a key must never let it return
// better off, so nothing is admitted beyond its policy.
func TestChaosKeyFlood(t *testing.T) {
	for _, text := range []string{
		"token-bucket 10/1m", "leaky-bucket 10/1m", "fixed-window 10/1m",
		"sliding-window 10/1m", "sliding-log 10/1m",
	} {
		t.Run(text, func(t *testing.T) {
			p := algo.MustParsePolicy(text)
			tb, err := memstore.New(1024).Table("flood", p)
			if err != nil {
				t.Fatal(err)
			}
			exact := map[string]*algo.State{}
			admit := func(key string, now, n int64) bool {
				d, err := tb.Decide(ctx, key, now, n)
				if err != nil {
					t.Fatal(err)
				}
				s := exact[key]
				if s == nil {
					s = new(algo.State)
					exact[key] = s
				}
				if !d.Allowed {
					return false
				}
				if want, _ := p.Decide(s, now, n); !want.Allowed {
					t.Fatalf("%q admitted %d at %v beyond its policy", key, n, time.Duration(now))
				}
				return true
			}
			r := rand.New(rand.NewPCG(1, 2))
			now := int64(time.Hour)
			for admit("victim", now, 1) {
			}
			victim := 0
			for try := range 120 {
				for i := range 500 {
					admit(fmt.Sprint("flood-", try, "-", i), now, 1+r.Int64N(p.Burst()))
				}
				now += int64(100 * time.Millisecond)
				if admit("victim", now, 1) {
					victim++
				}
			}
			t.Logf("victim admitted %d times in 120 tries at its limit; %d flood keys", victim, len(exact)-1)
		})
	}
}
