package redisstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The Redis semantics that a script call across hash slots relies on
// (redisstore's carryOnMaster), pinned on a real Redis Cluster: a
// function flagged allow-cross-slot-keys touches keys of several slots of
// its node, given as arguments; its declared keys must still share a
// slot; a key of another node fails the call at its access with "non
// local key"; what the call wrote before is not undone; and without the
// flag a second slot fails with "do not hash to the same slot".
func TestRedisCrossSlotFunctions(t *testing.T) {
	cc := redistest.SharedCluster(t).Client(t)
	// pin_cross and pin_strict run ARGV's commands, "SET key" or "GET
	// key", in order.
	const lib = `#!lua name=floodgate_pin_crossslot
local function run(KEYS, ARGV)
  for i = 1, #ARGV, 2 do
    if ARGV[i] == 'SET' then redis.call('SET', ARGV[i + 1], 'x') else redis.call('GET', ARGV[i + 1]) end
  end
  return 'ok'
end
redis.register_function{function_name='pin_cross', callback=run, flags={'allow-cross-slot-keys'}}
redis.register_function{function_name='pin_strict', callback=run}
`
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.FunctionLoadReplace(ctx, lib).Err()
	})
	if err != nil {
		t.Fatalf("Redis: FUNCTION LOAD of a library with flag allow-cross-slot-keys: %v (Redis 7 has the flag)", err)
	}
	// Keys of two slots of one master m, and one of another master.
	m, err := cc.MasterForKey(ctx, "pin:0")
	if err != nil {
		t.Fatal(err)
	}
	var mine []string
	var other string
	for i := 0; len(mine) < 4 || other == ""; i++ {
		k := fmt.Sprintf("pin:%d", i)
		n, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case n == m && (len(mine) == 0 || cc.ClusterKeySlot(ctx, k).Val() != cc.ClusterKeySlot(ctx, mine[0]).Val()):
			mine = append(mine, k)
		case n != m:
			other = k
		}
	}
	for _, k := range mine {
		if err := m.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	has := func(k string) bool { return m.Exists(ctx, k).Val() == 1 }

	if err := m.FCall(ctx, "pin_cross", []string{mine[0]}, "GET", mine[1], "SET", mine[1]).Err(); err != nil || !has(mine[1]) {
		t.Errorf("Redis: a function flagged allow-cross-slot-keys, declaring a key of one slot, set a key of another slot of its node: %v, set %v; want it done", err, has(mine[1]))
	}
	err = m.FCall(ctx, "pin_cross", []string{mine[0], mine[2]}, "GET", mine[2]).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Errorf("Redis: a function flagged allow-cross-slot-keys declaring keys of two slots: %v; want CROSSSLOT", err)
	}
	err = m.FCall(ctx, "pin_cross", []string{mine[0]}, "SET", mine[2], "GET", other).Err()
	if err == nil || !strings.Contains(err.Error(), "non local key") {
		t.Errorf("Redis: a function touching a key of another node: %v; want an error naming a non local key", err)
	}
	if !has(mine[2]) {
		t.Error("Redis: a function that failed at a key of another node undid its earlier SET; redisstore's docs say such writes stand (why its script reads every key before it writes any)")
	}
	err = m.FCall(ctx, "pin_strict", []string{mine[0]}, "SET", mine[3]).Err()
	if err == nil || !strings.Contains(err.Error(), "do not hash to the same slot") || has(mine[3]) {
		t.Errorf("Redis: a function without allow-cross-slot-keys setting a key of another slot: %v, set %v; want an error, %q, nothing set",
			err, has(mine[3]), "do not hash to the same slot")
	}
}
