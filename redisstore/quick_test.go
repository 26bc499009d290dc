package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/redistest"
)

var quickPrefixes atomic.Int64

// The script decides a lone decision on a bucket without a state table
// (quickBucket) until an op of a group of several loads the key's state;
// the key's later ops in the same script call take that state. One script
// call with both kinds on the same keys decides as the memory store does,
// one call after another, and leaves every key with its expiry. The
// policy's steps are a third of a nanosecond, so that the group's admission
// leaves the key's expiry where the lone decision before it put it: a
// commit that took the expiry for the one Redis held (the key had none)
// would keep no expiry at all.
func TestQuickThenGeneralInOneScriptCall(t *testing.T) {
	ctx := context.Background()
	c := redistest.SharedServer(t).Client(t)
	p := floodgate.TokenBucket(3, time.Nanosecond, 10)
	const now = int64(1_700_000_000_123_456_789)
	// Each call is a group of decisions, all or nothing: {"a", 1} decides
	// 1 on key a at now.
	type op struct {
		key string
		n   int64
	}
	script := [][]op{
		{{"a", 1}},            // quick: a is new
		{{"a", 1}},            // quick again, from the value the first left
		{{"a", 1}, {"b", 1}},  // a group: loads a's state
		{{"b", 1}},            // b has a state now: the general path
		{{"c", 1}},            // quick
		{{"c", 11}},           // above the burst: the general path loads c
		{{"d", 5}, {"c", 10}}, // a denied group: d and c as they were
		{{"d", 5}},            // d was loaded: the general path
		{{"e", 3}},            // quick
		{{"e", 8}},            // quick, denied
		{{"e", 7}},            // quick, admitted
	}
	for _, callerTime := range []bool{true, false} {
		t.Run(fmt.Sprintf("callerTime=%v", callerTime), func(t *testing.T) {
			opts := []Option{WithPrefix(fmt.Sprintf("quick%d:", quickPrefixes.Add(1)))}
			if callerTime {
				opts = append(opts, WithCallerTime())
			}
			s, err := New(c, opts...)
			if err != nil {
				t.Fatal(err)
			}
			tb, err := s.Table("t", p)
			if err != nil {
				t.Fatal(err)
			}
			mem := floodgate.NewMemoryStore(0)
			mtb, err := mem.Table("t", p)
			if err != nil {
				t.Fatal(err)
			}
			var calls []*call
			var want [][]floodgate.Op
			for _, group := range script {
				cl := &call{ctx: ctx}
				var m []floodgate.Op
				for _, o := range group {
					cl.ops = append(cl.ops, &floodgate.Op{Kind: floodgate.OpDecide, Table: tb, Key: o.key, Now: now, N: o.n})
					m = append(m, floodgate.Op{Kind: floodgate.OpDecide, Table: mtb, Key: o.key, Now: now, N: o.n})
				}
				if err := mem.Apply(ctx, m); err != nil {
					t.Fatal(err)
				}
				calls = append(calls, cl)
				want = append(want, m)
			}
			s.send(ctx, calls)
			for i, cl := range calls {
				if cl.err != nil {
					t.Fatalf("call %d: %v", i, cl.err)
				}
				for j, got := range cl.ops {
					w := want[i][j]
					// On Redis's clock only what does not depend on the
					// instant is compared: every op of the call has the same.
					if got.Decision.Allowed != w.Decision.Allowed || got.Decision.Remaining != w.Decision.Remaining ||
						(callerTime && got.Decision != w.Decision) {
						t.Errorf("call %d op %d (%s, %d): got %+v, want %+v", i, j, got.Key, got.N, got.Decision, w.Decision)
					}
				}
			}
			for _, key := range []string{"a", "b", "c", "d", "e"} {
				ttl, err := c.PTTL(ctx, KeyOf(tb, key)).Result()
				if err != nil {
					t.Fatal(err)
				}
				// -2: gone already (a state that drains in a nanosecond
				// expires within a millisecond); -1 would be no expiry.
				if ttl == -1 {
					t.Errorf("key %s has no expiry", key)
				}
			}
		})
	}
}
