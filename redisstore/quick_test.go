package redisstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

var quickPrefixes atomic.Int64

// The script decides a lone decision on a bucket or a window without
// a state table (quick) until an op of a group of several loads the key's
// state; the key's later ops in the same script call take that state. One
// script call with both kinds on the same keys decides as the memory store
// does, one call after another, and leaves every key with its expiry.
//
// The bucket's steps are a third of a nanosecond, so that the group's
// admission leaves the key's expiry where the lone decision before it put
// it: a commit that took the expiry for the one Redis held (the key had
// none) would keep no expiry at all. The fixed window's count goes up in
// the window of a key that an earlier script call wrote, whose expiry
// Redis keeps (SET KEEPTTL), and in that of keys new in the call, whose
// expiry it may not keep.
func TestQuickThenGeneralInOneScriptCall(t *testing.T) {
	ctx := context.Background()
	c := redistest.SharedServer(t).Client(t)
	const now = int64(1_700_000_000_123_456_789)
	// Each call is a group of decisions, all or nothing: {"a", 1} decides
	// 1 on key a at now.
	type op struct {
		key string
		n   int64
	}
	before := [][]op{{{"f", 1}}} // an earlier script call
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
		{{"f", 2}},            // quick, on a key Redis holds
		{{"f", 1}},            // quick again
		{{"f", 1}, {"g", 1}},  // a group: loads f's state
	}
	policies := map[string]algo.Policy{
		"bucket": algo.MustParsePolicy("token-bucket 3/1ns burst=10"),
		// Both script calls fall in one window unless they straddle the
		// end of one: a chance of about 10^-9 on Redis's clock.
		"fixed": algo.MustParsePolicy("fixed-window 10/240h"),
		// A window's units count for two PERIODs: its expiry is past one.
		"sliding": algo.MustParsePolicy("sliding-window 10/240h"),
	}
	for name, p := range policies {
		for _, callerTime := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/callerTime=%v", name, callerTime), func(t *testing.T) {
				opts := []Option{WithPrefix(fmt.Sprintf("quick%d:", quickPrefixes.Add(1)))}
				if callerTime {
					// Redis expires a key in real time, ResetAfter after its
					// write: a bucket that drains in nanoseconds would be gone
					// a millisecond later, while the caller's time stands
					// still, and on a busy machine f could expire between the
					// two script calls. WithMinTTL keeps it, as the store's
					// documentation asks of a caller whose time runs slower
					// than real time.
					opts = append(opts, WithCallerTime(), WithMinTTL(time.Minute))
				}
				s, err := New(c, opts...)
				if err != nil {
					t.Fatal(err)
				}
				tb, err := s.Table("t", p)
				if err != nil {
					t.Fatal(err)
				}
				mem := memstore.New(0)
				mtb, err := mem.Table("t", p)
				if err != nil {
					t.Fatal(err)
				}
				for _, calls := range [][][]op{before, script} {
					var sent []*call
					var want [][]store.Op
					for _, group := range calls {
						cl := &call{}
						var m []store.Op
						for _, o := range group {
							cl.Work.ops = append(cl.Work.ops, store.Op{Kind: store.OpDecide, Table: tb, Key: o.key, Now: now, N: o.n})
							m = append(m, store.Op{Kind: store.OpDecide, Table: mtb, Key: o.key, Now: now, N: o.n})
						}
						if err := mem.Apply(ctx, m); err != nil {
							t.Fatal(err)
						}
						sent = append(sent, cl)
						want = append(want, m)
					}
					s.carry(ctx, sent, false)
					for i, cl := range sent {
						if cl.Err != nil {
							t.Fatalf("call %d: %v", i, cl.Err)
						}
						for j, got := range cl.Work.ops {
							w := want[i][j]
							// On Redis's clock only what does not depend on
							// the instant is compared: every op of a script
							// call has the same, but the earlier call's
							// instant is another, at which the bucket's state
							// had drained.
							if !callerTime && name == "bucket" && got.Key == "f" {
								continue
							}
							if got.Result.Decision.Allowed != w.Result.Decision.Allowed || got.Result.Decision.Remaining != w.Result.Decision.Remaining ||
								(callerTime && got.Result.Decision != w.Result.Decision) {
								t.Errorf("call %d op %d (%s, %d): got %+v, want %+v", i, j, got.Key, got.N, got.Result.Decision, w.Result.Decision)
							}
						}
					}
				}
				for _, key := range []string{"a", "b", "c", "d", "e", "f", "g"} {
					ttl, err := c.PTTL(ctx, KeyOf(tb, key)).Result()
					if err != nil {
						t.Fatal(err)
					}
					// -2: gone already (a bucket that drains in a
					// nanosecond expires within a millisecond); -1 would be
					// no expiry.
					if ttl == -1 {
						t.Errorf("key %s has no expiry", key)
					}
					if name == "sliding" && ttl <= p.Period() {
						t.Errorf("key %s expires in %v, within one PERIOD", key, ttl)
					}
				}
			})
		}
	}
}
