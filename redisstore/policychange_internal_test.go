package redisstore

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// A policy change on the script's EVAL form, which a Redis without
// functions gets: it converts as the function does.
func TestPolicyChangeEval(t *testing.T) {
	c := redistest.SharedServer(t).Client(t)
	prefix := "evalchange" + time.Now().Format("150405.000000000") + ":"
	open := func() store.Store {
		s, err := New(c, WithPrefix(prefix), WithCallerTime(), WithMinTTL(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		s.run.noFunc.Store(true)
		return s
	}
	storetest.PolicyChange(t, open(), func(*testing.T, int64) store.Store { return open() })
}

// appendSeed writes a state as the script reads it back into the same
// state: the Redis value the script would write (stateOf's input) or a
// log's entries.
func TestAppendSeed(t *testing.T) {
	const t0 = int64(1795305600) * int64(time.Second)
	for _, policy := range []string{"token-bucket 7/1s", "fixed-window 5/8784h", "sliding-window 3/1h", "sliding-log 4/1h"} {
		p := algo.MustParsePolicy(policy)
		var st algo.State
		for i := range int64(3) {
			p.Decide(&st, t0+i*int64(time.Second)+7, 1)
		}
		seed := appendSeed(nil, p.Algorithm(), &st)
		if p.Algorithm() == algo.SlidingLog {
			want := appendDoubles(append([]byte{byte(algo.SlidingLog)}, 3, 0, 0, 0),
				t0/1e9, 7, 1, t0/1e9+1, 7, 1, t0/1e9+2, 7, 1)
			if string(seed) != string(want) {
				t.Errorf("%s: seed %x, want %x", policy, seed, want)
			}
			continue
		}
		got, err := stateOf(p.Algorithm(), string(seed))
		gb, _ := got.MarshalBinary()
		sb, _ := st.MarshalBinary()
		if err != nil || string(gb) != string(sb) {
			t.Errorf("%s: seed %x reads as %+v (%v), want %+v", policy, seed, got, err, st)
		}
	}
	if seed := appendSeed(nil, algo.SlidingLog, &algo.State{}); string(seed) != "\x03\x00\x00\x00\x00" {
		t.Errorf("the initial state, as a log's seed: %x, want a log of no entries", seed)
	}
}
