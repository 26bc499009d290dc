package redisstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

var ctx = context.Background()

// With Redis's clock, a key expires at the instant its state drains,
// rounded up to the millisecond: PEXPIRETIME is ceil(ResetAt/1ms) exactly.
func TestExpiryIsExactWithServerTime(t *testing.T) {
	c := testClient(t)
	s := newStore(t, c)
	for _, policy := range []string{"token-bucket 3/1h burst=5", "fixed-window 5/1h", "sliding-window 5/1h"} {
		p := algo.MustParsePolicy(policy)
		l := floodgate.Must(floodgate.NewLimiter(p, floodgate.WithStore(s)))
		// The first decision sets the expiry; the second moves it (a
		// bucket) or keeps it (a window's count in the same window, which
		// the script writes with KEEPTTL): exact either way.
		for step, n := range []int64{2, 1} {
			d, err := l.AllowN(ctx, "alice", n)
			if err != nil || !d.Allowed {
				t.Fatalf("%s: %+v, %v", policy, d, err)
			}
			key := redisKey(t, s, p, "alice")
			v, err := c.Get(ctx, key).Result()
			if err != nil {
				t.Fatalf("%s: GET %s: %v", policy, key, err)
			}
			alg, start, x, _, ok := decodeState(v)
			if !ok || alg != p.Algorithm() {
				t.Fatalf("%s: state %q, want ALG T X Y", policy, v)
			}
			var resetAt int64 // algo.Policy.ResetAt of the stored state
			switch p.Algorithm() {
			case algo.TokenBucket:
				resetAt = start
				if x > 0 {
					resetAt++
				}
			case algo.FixedWindow:
				resetAt = start + int64(p.Period())
			case algo.SlidingWindow:
				resetAt = start + 2*int64(p.Period())
			}
			want := (resetAt + 1e6 - 1) / 1e6
			got, err := c.PExpireTime(ctx, key).Result()
			if err != nil || got.Milliseconds() != want {
				t.Errorf("%s, decision %d: PEXPIRETIME %v (%v), want %d ms (state %q)", policy, step, got.Milliseconds(), err, want, v)
			}
			// The decision's ResetAfter, measured from Redis's clock, ends at
			// the same instant, to the microsecond of TIME.
			tm, _ := c.Time(ctx).Result()
			if left := time.Duration(resetAt - tm.UnixNano()); left > d.ResetAfter || left < d.ResetAfter-2*time.Second {
				t.Errorf("%s: ResetAfter %v, but the state drains in %v by Redis's clock", policy, d.ResetAfter, left)
			}
		}
	}
}

// decodeState reads a bucket's or window's state as the script writes it
// (lua/batch.lua): ALG as a byte, then T's seconds and nanoseconds, X and
// Y as little-endian doubles, each an integer.
func decodeState(v string) (alg algo.Algorithm, t, x, y int64, ok bool) {
	if len(v) != 33 {
		return 0, 0, 0, 0, false
	}
	f := func(i int) int64 {
		d := math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[1+8*i:])))
		if d != math.Trunc(d) || d < 0 || d >= 1<<53 {
			ok = false
		}
		return int64(d)
	}
	ok = true
	sec, ns := f(0), f(1)
	return algo.Algorithm(v[0]), sec*1e9 + ns, f(2), f(3), ok && ns < 1e9
}

// encodeState is decodeState's inverse, for writing states by hand.
func encodeState(alg byte, fields ...float64) string {
	b := []byte{alg}
	for _, d := range fields {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(d))
	}
	return string(b)
}

// redisKey is where s keeps key of the limiter named by p's string.
func redisKey(t *testing.T, s *redisstore.Store, p algo.Policy, key string) string {
	t.Helper()
	tb, err := s.Table(p.String(), p)
	if err != nil {
		t.Fatal(err)
	}
	return redisstore.KeyOf(tb, key)
}

// On Redis's clock, an admitted event's stamp is in Redis's time, whatever
// the caller's clock says, and a refund with it gives back what it took.
func TestServerClockStamps(t *testing.T) {
	c := testClient(t)
	s := newStore(t, c)
	for _, policy := range []string{"token-bucket 10/1h", "leaky-bucket 10/1h", "sliding-log 10/1h",
		"sliding-window 10/1h", "fixed-window 10/1h"} {
		p := algo.MustParsePolicy(policy)
		tb, _ := s.Table(policy, p)
		before := c.Time(ctx).Val().UnixNano()
		ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: "k", Now: 42, N: 4}}
		if err := s.Apply(ctx, ops); err != nil || !ops[0].Result.Decision.Allowed {
			t.Fatalf("%s: %+v %v", policy, ops[0], err)
		}
		after := c.Time(ctx).Val().UnixNano()
		st := ops[0].Result.Stamp
		if st.At < before || st.At > after {
			t.Errorf("%s: stamp at %d, not within Redis's %d..%d", policy, st.At, before, after)
		}
		if p.Algorithm() == algo.TokenBucket || p.Algorithm() == algo.LeakyBucket {
			// An empty bucket's TAT after 4 units: now + 4 * 6 minutes.
			if tat := st.TAT - st.At; tat != int64(24*time.Minute) {
				t.Errorf("%s: stamp's TAT %v after its time, want 24m", policy, time.Duration(tat))
			}
		} else if st.TAT != 0 || st.Frac != 0 {
			t.Errorf("%s: a window's stamp has a TAT: %+v", policy, st)
		}
		if d, _ := tb.Decide(ctx, "k", 0, 0); d.Remaining != 6 {
			t.Errorf("%s: %d remaining after 4 of 10, want 6", policy, d.Remaining)
		}
		refund := []store.Op{{Kind: store.OpRefund, Table: tb, Key: "k", Now: 42, N: 4, Stamp: st}}
		if err := s.Apply(ctx, refund); err != nil {
			t.Fatal(err)
		}
		if d, _ := tb.Decide(ctx, "k", 0, 0); d.Remaining != 10 {
			t.Errorf("%s: %d remaining after the refund, want 10", policy, d.Remaining)
		}
	}
}

// A key whose state drains goes: a refund of everything deletes it, and
// so does a peek after it drained; nothing is left behind.
func TestDrainedKeysAreDeleted(t *testing.T) {
	c := testClient(t)
	s := newStore(t, c, redisstore.WithCallerTime())
	t0 := int64(1795305600) * 1e9
	for _, policy := range []string{"token-bucket 3/1s", "sliding-log 3/1s", "sliding-window 3/1s", "fixed-window 3/1s"} {
		p := algo.MustParsePolicy(policy)
		tb, _ := s.Table(policy, p)
		key := redisstore.KeyOf(tb, "k")
		ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: "k", Now: t0, N: 2}}
		if err := s.Apply(ctx, ops); err != nil || !ops[0].Result.Decision.Allowed {
			t.Fatalf("%s: %+v %v", policy, ops[0], err)
		}
		if n := c.Exists(ctx, key).Val(); n != 1 {
			t.Fatalf("%s: key %q missing after an admitted event", policy, key)
		}
		refund := []store.Op{{Kind: store.OpRefund, Table: tb, Key: "k", Now: t0, N: 2, Stamp: ops[0].Result.Stamp}}
		if err := s.Apply(ctx, refund); err != nil {
			t.Fatal(err)
		}
		if n := c.Exists(ctx, key).Val(); n != 0 {
			t.Errorf("%s: key %q left after a full refund: %v", policy, key, c.Type(ctx, key).Val())
		}
		// Spend, let it drain, peek: gone.
		if _, err := tb.Decide(ctx, "k", t0, 1); err != nil {
			t.Fatal(err)
		}
		if d, err := tb.Decide(ctx, "k", t0+3e9, 0); err != nil || d.ResetAfter != 0 {
			t.Fatalf("%s: peek after draining: %+v %v", policy, d, err)
		}
		if n := c.Exists(ctx, key).Val(); n != 0 {
			t.Errorf("%s: key %q left after draining", policy, key)
		}
	}
}

// With the caller's time, a key lives ResetAfter of real time after its
// last write, or WithMinTTL if longer.
func TestExpiryWithCallerTime(t *testing.T) {
	c := testClient(t)
	s := newStore(t, c, redisstore.WithCallerTime())
	tb, _ := s.Table("x", algo.MustParsePolicy("token-bucket 1/10s"))
	d, err := tb.Decide(ctx, "k", 5e9, 1)
	if err != nil || !d.Allowed || d.ResetAfter != 10*time.Second {
		t.Fatalf("%+v %v", d, err)
	}
	if ttl := c.PTTL(ctx, redisstore.KeyOf(tb, "k")).Val(); ttl > 10*time.Second || ttl < 9*time.Second {
		t.Errorf("PTTL %v, want 10s less the test's time", ttl)
	}
	s2 := newStore(t, c, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour))
	tb2, _ := s2.Table("x", algo.MustParsePolicy("token-bucket 1/10s"))
	if _, err := tb2.Decide(ctx, "k", 5e9, 1); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx, redisstore.KeyOf(tb2, "k")).Val(); ttl < 59*time.Minute {
		t.Errorf("PTTL %v with WithMinTTL(1h)", ttl)
	}
}

// A sliding log is a hash: h, c, u and one field per entry, "T N".
func TestSlidingLogLayout(t *testing.T) {
	c := testClient(t)
	s := newStore(t, c, redisstore.WithCallerTime())
	tb, _ := s.Table("log", algo.MustParsePolicy("sliding-log 5/1s"))
	for _, ev := range []struct{ t, n int64 }{{1e9, 1}, {1e9, 2}, {1.5e9, 1}, {2.2e9, 1}} {
		if d, err := tb.Decide(ctx, "k", ev.t, ev.n); err != nil || !d.Allowed {
			t.Fatalf("%+v: %+v %v", ev, d, err)
		}
	}
	got := c.HGetAll(ctx, redisstore.KeyOf(tb, "k")).Val()
	// The entries at 1s expired at 2.2s; the log holds 1.5s and 2.2s.
	want := map[string]string{"h": "1", "c": "2", "u": "2", "1": "1500000000 1", "2": "2200000000 1"}
	if len(got) != len(want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("field %s = %q, want %q (log %v)", k, got[k], v, got)
		}
	}
}

// Keys name the limiter and, when it is not the default name, the policy,
// with the characters that would break the layout escaped.
func TestKeyNames(t *testing.T) {
	s, err := redisstore.New(testClient(t))
	if err != nil {
		t.Fatal(err)
	}
	p := algo.MustParsePolicy("token-bucket 5/1s")
	for _, c := range []struct{ name, want string }{
		{"token-bucket 5/1s", "floodgate:token-bucket 5/1s:{u1}:x"},
		{"api", "floodgate:api@token-bucket 5/1s:{u1}:x"},
		{"a:b{c}@%", "floodgate:a%3Ab%7Bc%7D%40%25@token-bucket 5/1s:{u1}:x"},
	} {
		tb, err := s.Table(c.name, p)
		if err != nil {
			t.Fatal(err)
		}
		if got := redisstore.KeyOf(tb, "{u1}:x"); got != c.want {
			t.Errorf("name %q: key %q, want %q", c.name, got, c.want)
		}
	}
	if _, err := s.Table("x", algo.Policy{}); err == nil {
		t.Error("the zero Policy was accepted")
	}
}

// Clear deletes the store's keys and no others, on a server and on a
// cluster.
func TestClear(t *testing.T) {
	for name, c := range map[string]redis.UniversalClient{"server": testClient(t), "cluster": redistest.SharedCluster(t).Client(t)} {
		s := newStore(t, c, redisstore.WithPrefix("clear*[x]:"))
		other := newStore(t, c, redisstore.WithPrefix("clear-other:"))
		for _, st := range []*redisstore.Store{s, other} {
			l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("sliding-log 5/1h"), floodgate.WithStore(st)))
			for i := range 50 {
				if _, err := l.Allow(ctx, strconv.Itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Clear(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		count := func(match string) int {
			n := 0
			scan := func(ctx context.Context, c redis.UniversalClient) error {
				keys, err := c.Keys(ctx, match).Result()
				n += len(keys)
				return err
			}
			if cc, ok := c.(*redis.ClusterClient); ok {
				var mu sync.Mutex
				cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
					mu.Lock()
					defer mu.Unlock()
					return scan(ctx, c)
				})
			} else {
				scan(ctx, c)
			}
			return n
		}
		if n := count(`clear\*\[x\]:*`); n != 0 {
			t.Errorf("%s: %d keys left", name, n)
		}
		if n := count("clear-other:*"); n != 50 {
			t.Errorf("%s: %d of the other store's 50 keys left", name, n)
		}
		other.Clear(ctx)
	}
}

// The script reaches Redis again after SCRIPT FLUSH and FUNCTION FLUSH
// (the store loads its library again), and a key that another program overwrote is an error naming it,
// wrapping ErrCorrupt, that changes nothing.
func TestScriptFlushAndCorruptState(t *testing.T) {
	c := testClient(t)
	s := newStore(t, c, redisstore.WithCallerTime())
	for _, policy := range []string{"token-bucket 5/1s", "sliding-log 5/1s"} {
		tb, _ := s.Table(policy, algo.MustParsePolicy(policy))
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if d, err := tb.Decide(ctx, "k", 1e9, 1); err != nil || !d.Allowed {
			t.Fatalf("%s after SCRIPT FLUSH and FUNCTION FLUSH: %+v %v", policy, d, err)
		}
		key := redisstore.KeyOf(tb, "bad")
		bad := []string{"garbage"}
		if strings.HasPrefix(policy, "sliding-log") {
			c.HSet(ctx, key, "h", "0", "c", "1", "u", "1", "0", "not an entry")
			bad = []string{""}
		} else {
			// Text, or 33 bytes that are no state: an unknown algorithm, a
			// NaN, a negative count, a fraction, nanoseconds past a second.
			bad = append(bad, "1 1000000000 0 0", encodeState(9, 1, 0, 0, 0), encodeState(1, math.NaN(), 0, 0, 0),
				encodeState(1, 1, 0, -1, 0), encodeState(1, 1, 0.5, 0, 0), encodeState(1, 1, 1e9, 0, 0),
				encodeState(1, 1, 0, 0, 0)[:32])
		}
		for _, v := range bad {
			if v != "" {
				c.Set(ctx, key, v, 0)
			}
			_, err := tb.Decide(ctx, "bad", 1e9, 1)
			if !errors.Is(err, redisstore.ErrCorrupt) || !strings.Contains(err.Error(), key) {
				t.Errorf("%s: corrupt state %q gave %v", policy, v, err)
			}
			if got, _ := c.Get(ctx, key).Result(); v != "" && got != v {
				t.Errorf("%s: corrupt state %q became %q", policy, v, got)
			}
		}
		if d, err := tb.Decide(ctx, "k", 1e9, 0); err != nil || d.Remaining != 4 {
			t.Errorf("%s: the good key after the error: %+v %v", policy, d, err)
		}
	}
}
