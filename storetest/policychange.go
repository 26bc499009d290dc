package storetest

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// policyChanges are changes of a limiter's policy under one name, from
// fixed-window 100/1h with 80 units spent, and the units each leaves.
var policyChanges = []struct {
	to   string
	want int64
}{
	{"fixed-window 200/1h", 120}, // a raise: the new headroom at once
	{"fixed-window 50/1h", 0},    // a cut: at once
	{"sliding-window 200/1h", 120},
	{"sliding-log 200/1h", 120},
	{"token-bucket 200/1h", 120},
	{"leaky-bucket 100/1h capacity=90", 10},
}

// PolicyChange checks that s keeps each key's spent units, converted by
// algo.Policy.Convert, when a limiter keeps its name and changes its
// policy, across restart, which returns the store as a process started
// afresh at now (nanoseconds since the Unix epoch) would find it (s itself
// for a store that keeps nothing in the process). A key never spent starts afresh under the new policy.
func PolicyChange(t *testing.T, s store.Store, restart func(t *testing.T, now int64) store.Store) {
	t.Helper()
	for i := range policyChanges {
		decide(t, table(t, s, fmt.Sprint("change-", i), "fixed-window 100/1h"), "k", t0, 80)
	}
	s = restart(t, t0)
	for i, c := range policyChanges {
		tb := table(t, s, fmt.Sprint("change-", i), c.to)
		if d := peek(t, tb, "k", t0+1); d.Remaining != c.want {
			t.Errorf("fixed-window 100/1h with 80 spent, then %s: Remaining %d, want %d", c.to, d.Remaining, c.want)
		}
		if d, burst := peek(t, tb, "other", t0+1), algo.MustParsePolicy(c.to).Burst(); d.Remaining != burst {
			t.Errorf("%s: a key never spent has Remaining %d, want %d", c.to, d.Remaining, burst)
		}
	}
}
