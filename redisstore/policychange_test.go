package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// policyClients are the Redis deployments a policy change is tested on.
func policyClients(t *testing.T) []struct {
	name   string
	client redis.UniversalClient
} {
	return []struct {
		name   string
		client redis.UniversalClient
	}{
		{"single", testClient(t)},
		{"cluster", redistest.SharedCluster(t).Client(t)},
	}
}

// TestPolicyChange: a limiter that keeps its name and changes its policy
// keeps each key's spent units in Redis, read by a process started
// afresh (another Store on the same prefix), on one Redis and on a
// Cluster, where a key's former Redis key is in another slot.
func TestPolicyChange(t *testing.T) {
	for _, c := range policyClients(t) {
		for _, cache := range []bool{false, true} {
			t.Run(fmt.Sprint(c.name, "/denycache=", cache), func(t *testing.T) {
				prefix := fmt.Sprintf("change%d:", time.Now().UnixNano())
				opts := []redisstore.Option{redisstore.WithPrefix(prefix), redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour)}
				if cache {
					opts = append(opts, redisstore.WithDenyCache(1<<20))
				}
				open := func() store.Store {
					s, err := redisstore.New(c.client, opts...)
					if err != nil {
						t.Fatal(err)
					}
					return s
				}
				storetest.PolicyChange(t, open(), func(*testing.T, int64) store.Store { return open() })
			})
		}
	}
}

// TestPolicyChangeRedisClock: on Redis's clock, the script's own time,
// which it reports with a miss, is the time the store converts at.
func TestPolicyChangeRedisClock(t *testing.T) {
	for _, c := range policyClients(t) {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, c.client)
			// 200/1h refills a unit in 18 s: the test takes far less.
			mustDecide(t, mustTable(t, s, "api", "token-bucket 100/1h"), "k", 0, 60)
			if d := mustDecide(t, mustTable(t, s, "api", "token-bucket 200/1h"), "k", 0, 10); !d.Allowed || d.Remaining != 130 {
				t.Errorf("under the new policy: %+v, want 130 remaining (60 converted, 10 spent)", d)
			}
		})
	}
}

// TestPolicyChangeRollingDeploy: during a rolling deploy, processes of
// the old policy and of the new one decide on one name at once. Each
// policy's keys are apart, so each process goes on spending its own
// policy's units; a key the new policy does not hold starts, once, from
// its state under the old one, and a second process of the new policy,
// or a second call, does not convert it again.
func TestPolicyChangeRollingDeploy(t *testing.T) {
	ctx := context.Background()
	const t0 = int64(1795305600) * int64(time.Second)
	for _, c := range policyClients(t) {
		t.Run(c.name, func(t *testing.T) {
			prefix := fmt.Sprintf("deploy%d:", time.Now().UnixNano())
			table := func(policy string) store.Table {
				s, err := redisstore.New(c.client, redisstore.WithPrefix(prefix), redisstore.WithCallerTime(),
					redisstore.WithMinTTL(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				tb, err := s.Table("api", algo.MustParsePolicy(policy))
				if err != nil {
					t.Fatal(err)
				}
				return tb
			}
			decide := func(tb store.Table, at, n int64) algo.Decision {
				t.Helper()
				d, err := tb.Decide(ctx, "k", at, n)
				if err != nil {
					t.Fatal(err)
				}
				return d
			}
			old := table("fixed-window 100/1h")
			decide(old, t0, 60)
			newA, newB := table("fixed-window 200/1h"), table("fixed-window 200/1h")
			if d := decide(newA, t0+1, 10); !d.Allowed || d.Remaining != 130 {
				t.Fatalf("the first decision under the new policy: %+v, want 130 remaining (60 converted, 10 spent)", d)
			}
			decide(old, t0+2, 30) // the old process goes on, on its own key
			if d := decide(newB, t0+3, 0); d.Remaining != 130 {
				t.Errorf("another process of the new policy: %d remaining, want 130: converted once, not again", d.Remaining)
			}
			if d := decide(old, t0+4, 0); d.Remaining != 10 {
				t.Errorf("the old policy's key: %d remaining, want 10: the old process's units are its own", d.Remaining)
			}
		})
	}
}

// policyChanges are the policies TestPolicyChangeAgreesWithMemory changes
// between: every algorithm, on fast paths and on big integers.
var policyChanges = []string{
	"token-bucket 100/1h",
	"leaky-bucket 100/1h capacity=50",
	"fixed-window 100/1h",
	"sliding-window 100/1h",
	"sliding-log 100/1h",
	"sliding-log 5/8784h",
	"token-bucket 999999937/8760h burst=999999999",
	"fixed-window 1000/720h",
}

// TestPolicyChangeAgreesWithMemory: for every change between
// policyChanges, a key spent under the former policy is decided under the
// new one exactly as the memory store decides it, which converts by
// algo.Policy.Convert: alone (the script's short form), in an Apply of
// several ops (all or nothing, with a key Redis holds) and in an
// ApplyEach of every change at once.
func TestPolicyChangeAgreesWithMemory(t *testing.T) {
	ctx := context.Background()
	const t0 = int64(1795305600) * int64(time.Second)
	for _, c := range policyClients(t) {
		t.Run(c.name, func(t *testing.T) {
			rs := newStore(t, c.client, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
			ms := memstore.New(0)
			stores := []store.Store{ms, rs}
			type change struct{ name, from, to string }
			var changes []change
			for _, from := range policyChanges {
				for _, to := range policyChanges {
					if from != to {
						changes = append(changes, change{fmt.Sprint("c", len(changes)), from, to})
					}
				}
			}
			tables := make([][2]store.Table, len(changes)) // each store's, under the new policy
			for i, ch := range changes {
				for j, s := range stores {
					old := mustTable(t, s, ch.name, ch.from)
					for _, k := range []string{"alone", "apply", "each"} {
						mustDecide(t, old, k, t0, 3)
						mustDecide(t, old, k, t0+int64(10*time.Minute), 2)
					}
					tables[i][j] = mustTable(t, s, ch.name, ch.to)
					mustDecide(t, tables[i][j], "held", t0, 1)
				}
			}
			at := t0 + int64(20*time.Minute)
			var results [2][]store.Op
			for j, s := range stores {
				var each []store.Op
				for i := range changes {
					tb := tables[i][j]
					d, err := tb.Decide(ctx, "alone", at, 1)
					apply := []store.Op{{Kind: store.OpDecide, Table: tb, Key: "held", Now: at, N: 1},
						{Kind: store.OpDecide, Table: tb, Key: "apply", Now: at, N: 2}}
					if err2 := s.Apply(ctx, apply); err != nil || err2 != nil {
						t.Fatal(err, err2)
					}
					results[j] = append(results[j], store.Op{Result: store.Result{Decision: d}}, apply[0], apply[1])
					each = append(each, store.Op{Kind: store.OpDecide, Table: tb, Key: "each", Now: at, N: 1},
						store.Op{Kind: store.OpDecide, Table: tb, Key: "never", Now: at, N: 0})
				}
				if err := s.ApplyEach(ctx, each); err != nil {
					t.Fatal(err)
				}
				results[j] = append(results[j], each...)
			}
			for i := range results[0] {
				ch := changes[i/3%len(changes)]
				if i >= 3*len(changes) {
					ch = changes[(i-3*len(changes))/2]
				}
				if m, r := results[0][i].Result.Decision, results[1][i].Result.Decision; m != r {
					t.Errorf("%s then %s, op %d: Redis %+v, memory %+v", ch.from, ch.to, i, r, m)
				}
			}
		})
	}
}

func mustTable(t testing.TB, s store.Store, name, policy string) store.Table {
	t.Helper()
	tb, err := s.Table(name, algo.MustParsePolicy(policy))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func mustDecide(t testing.TB, tb store.Table, key string, at, n int64) algo.Decision {
	t.Helper()
	d, err := tb.Decide(context.Background(), key, at, n)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPolicyChangeCost: a decision on a key that Redis holds costs Redis
// the same commands whether or not its name had another policy; one on a
// key it does not hold costs, after a policy change, a script call that
// misses (with its TIME and MGET) and a read of the key under the former
// policy.
func TestPolicyChangeCost(t *testing.T) {
	srv := redistest.NewServer(t)
	s := newStore(t, srv.Client(t))
	plain := mustTable(t, s, "plain", "token-bucket 100/1h")
	mustDecide(t, mustTable(t, s, "api", "token-bucket 50/1h"), "spent", 0, 1)
	changed := mustTable(t, s, "api", "token-bucket 100/1h")
	for _, tb := range []store.Table{plain, changed} {
		mustDecide(t, tb, "held", 0, 1) // reads the record, loads the script
	}
	m := redistest.NewMeter(srv)
	commands := func(tb store.Table, key string) int64 {
		m.Start(t)
		mustDecide(t, tb, key, 0, 1)
		return m.Stop(t).Commands
	}
	if p, c := commands(plain, "held"), commands(changed, "held"); p != c {
		t.Errorf("a held key: %d commands after a policy change, %d without", c, p)
	}
	// FCALL, TIME, MGET and SET; after a change, first FCALL, TIME, MGET
	// and the miss, then a GET of the former key.
	if p, c := commands(plain, "spent"), commands(changed, "spent"); c != p+4 {
		t.Errorf("a key to convert: %d commands, want %d: a script call that misses and a read", c, p+4)
	}
}

// BenchmarkPolicyChange decides, one caller at a time on the package's
// Redis, after a policy change (token-bucket 100/1s to 200/1s): on a key
// that Redis holds under the new policy ("held", which must cost what
// BenchmarkDecide's serial calls do), and on a key spent only under the
// former policy, which the call converts ("convert": a miss, a read and a
// second script call).
func BenchmarkPolicyChange(b *testing.B) {
	ctx := context.Background()
	for _, convert := range []bool{false, true} {
		b.Run(map[bool]string{false: "held", true: "convert"}[convert], func(b *testing.B) {
			s := newStore(b, testClient(b))
			former := mustTable(b, s, "api", "token-bucket 1000000000/1s")
			tb := mustTable(b, s, "api", "token-bucket 2000000000/1s")
			keys := make([]string, b.N)
			var ops []store.Op
			for i := range keys {
				keys[i] = "held"
				if convert {
					keys[i] = fmt.Sprint("k", i)
					ops = append(ops, store.Op{Kind: store.OpDecide, Table: former, Key: keys[i], Now: 0, N: 1})
				}
			}
			for len(ops) > 0 {
				chunk := ops[:min(len(ops), 1000)]
				if err := s.ApplyEach(ctx, chunk); err != nil {
					b.Fatal(err)
				}
				ops = ops[len(chunk):]
			}
			mustDecide(b, tb, "held", 0, 1) // reads the record, loads the script
			b.ReportAllocs()
			m := redistest.NewMeter(testServer(b))
			m.Start(b)
			b.ResetTimer()
			for _, k := range keys {
				if _, err := tb.Decide(ctx, k, 0, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			m.Stop(b).Report(b, b.N)
		})
	}
}
