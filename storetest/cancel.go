package storetest

import (
	"cmp"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// cancelPolicies are the policies of testCancel: every algorithm, buckets
// of bursts 1 to 5 whose emission intervals are whole nanoseconds or not.
var cancelPolicies = []string{
	"leaky-bucket 5/1s capacity=1",
	"token-bucket 3/1s burst=5",
	"token-bucket 7/2s burst=3",
	"leaky-bucket 1000/7ms capacity=20",
	"sliding-log 4/1s",
	"sliding-window 5/1s",
	"fixed-window 3/500ms",
}

// reservation is one admitted OpDecide or OpSchedule of a cancel trace,
// and whether it was cancelled (its units refunded by the op's Refund).
type reservation struct {
	op        store.Op
	cancelled bool
	committed bool
}

// testCancel: a cancelled reservation never lets a key admit more than
// its policy allows. Random interleavings of decisions (Reserve),
// schedules (Schedule), refunds (Cancel) of any earlier reservation
// still open, and commits, on a clock moving forward, must leave the
// reservations not cancelled acting within the policy at the instants
// the store gave them (actsConform), and every op must have the outcome
// package algo gives (store.Op.Carry on a local State). The first trace
// is issue 28's: on leaky-bucket 5/1s capacity=1, requests at 0, 30, 60
// and 90ms act at 0, 200, 400 and 600ms; the second is cancelled at
// 100ms; one at 300ms must not act at 600ms too.
func testCancel(t *testing.T, s store.Store) {
	for i, pol := range cancelPolicies {
		p := algo.MustParsePolicy(pol)
		tb := table(t, s, "cancel "+pol, pol) // a name per policy: one name under two is PolicyChange's
		now := t0                             // one clock per table, moving forward from trace to trace
		if i == 0 {
			c := &cancelTrace{t: t, s: s, tb: tb, p: p, key: "issue-28", now: now}
			c.issue28()
			now = c.now
		}
		for trial := range 4 {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(trial)))
			c := &cancelTrace{t: t, s: s, tb: tb, p: p, key: fmt.Sprint("k", trial), now: now}
			c.random(rng, 50)
			now = c.now
		}
	}
}

// cancelTrace is one key's trace of testCancel in progress.
type cancelTrace struct {
	t   *testing.T
	s   store.Store
	tb  store.Table
	p   algo.Policy
	key string
	now int64
	// local is the key's State by package algo, which the store must
	// match.
	local algo.State
	rs    []*reservation
}

// issue28 replays the trace of issue 28 from now and checks its acts.
func (c *cancelTrace) issue28() {
	start, ms := c.now, int64(time.Millisecond)
	for i := range int64(4) {
		c.now = start + 30*i*ms
		c.schedule(1, time.Second)
	}
	c.now = start + 100*ms
	c.cancel(c.rs[1])
	c.now = start + 300*ms
	c.schedule(1, time.Second)
	if at := c.rs[4].op.Result.At - start; at != 800*ms {
		c.t.Fatalf("%v: issue 28: a request at 300ms acts at %v, want 800ms, after the one queued at 90ms acts at 600ms", c.p, time.Duration(at))
	}
	c.check()
}

// random runs steps random steps, then checks the acts.
func (c *cancelTrace) random(rng *rand.Rand, steps int) {
	P := int64(c.p.Period())
	T := max(P/c.p.Limit(), 1)
	for range steps {
		switch rng.IntN(4) { // mostly less than T: queues build up
		case 0: // same instant
		case 1, 2:
			c.now += rng.Int64N(T)
		default:
			c.now += rng.Int64N(P)
		}
		n := 1 + rng.Int64N(min(c.p.Burst(), 3))
		switch x := rng.IntN(10); {
		case x < 5:
			c.schedule(n, time.Duration(rng.Int64N(3*P)))
		case x < 6:
			c.op(store.Op{Kind: store.OpDecide, N: n})
		case x < 9:
			if r := c.open(rng); r != nil {
				c.cancel(r)
			}
		default:
			if r := c.open(rng); r != nil {
				r.committed = true
			}
		}
	}
	c.check()
}

// open draws a reservation neither cancelled nor committed, or nil.
func (c *cancelTrace) open(rng *rand.Rand) *reservation {
	var open []*reservation
	for _, r := range c.rs {
		if !r.cancelled && !r.committed {
			open = append(open, r)
		}
	}
	if len(open) == 0 {
		return nil
	}
	return open[rng.IntN(len(open))]
}

func (c *cancelTrace) schedule(n int64, maxWait time.Duration) {
	c.op(store.Op{Kind: store.OpSchedule, N: n, MaxWait: maxWait})
}

// cancel refunds r's units at now, as Reservation.Cancel does.
func (c *cancelTrace) cancel(r *reservation) {
	refund, _ := r.op.Refund(c.now)
	c.op(refund)
	r.cancelled = true
}

// op applies op to the key at now, on the store and on the local State,
// fails unless they agree, and keeps an admission as a reservation.
func (c *cancelTrace) op(op store.Op) {
	c.t.Helper()
	op.Table, op.Key, op.Now = c.tb, c.key, c.now
	ops := []store.Op{op}
	apply(c.t, c.s, ops)
	if _, err := op.Carry(&c.p, &c.local); err != nil {
		c.t.Fatal(err)
	}
	got, want := ops[0].Result, op.Result
	if got.Decision != want.Decision || got.At != want.At || got.Stamp != want.Stamp {
		c.t.Fatalf("%v, %s: op kind %d n %d at %d: store %+v, algo %+v", c.p, c.key, op.Kind, op.N, op.Now-t0, got, want)
	}
	if op.Kind != store.OpRefund && want.Decision.Allowed {
		c.rs = append(c.rs, &reservation{op: ops[0]})
	}
}

// check fails unless the reservations not cancelled act within the
// policy.
func (c *cancelTrace) check() {
	c.t.Helper()
	var acts []act
	for _, r := range c.rs {
		if !r.cancelled {
			acts = append(acts, act{r.op.Result.At, r.op.N})
		}
	}
	if err := actsConform(c.p, acts); err != nil {
		c.t.Fatalf("%v, %s: the reservations not cancelled act beyond the policy: %v", c.p, c.key, err)
	}
}

// act is units used at an instant.
type act struct{ at, n int64 }

// actsConform returns an error naming the first of acts that spends more
// than p allows, counting only acts: for token-bucket and leaky-bucket,
// the acts in time order must pass GCRA (burst B); for fixed-window no
// window may hold more than LIMIT; for sliding-log no span of PERIOD; for
// sliding-window no act may see prev*(PERIOD-elapsed)/PERIOD + cur above
// LIMIT. It is written from the definitions in package algo's doc, not
// from its code.
func actsConform(p algo.Policy, acts []act) error {
	slices.SortStableFunc(acts, func(a, b act) int { return cmp.Compare(a.at, b.at) })
	switch p.Algorithm() {
	case algo.TokenBucket, algo.LeakyBucket:
		return gcraConform(p, acts)
	}
	P, L := int64(p.Period()), p.Limit()
	for i, a := range acts {
		var inWindow, prev int64 // cur and prev of a sliding window
		for _, b := range acts[:i+1] {
			switch {
			case p.Algorithm() == algo.SlidingLog && b.at > a.at-P:
				inWindow += b.n
			case p.Algorithm() != algo.SlidingLog && b.at/P == a.at/P:
				inWindow += b.n
			case b.at/P == a.at/P-1:
				prev += b.n
			}
		}
		for _, b := range acts[i+1:] { // the same instant, later in order
			if b.at == a.at {
				inWindow += b.n
			}
		}
		over := inWindow > L
		if p.Algorithm() == algo.SlidingWindow {
			e := a.at % P
			over = new(big.Int).Add(mulInt(prev, P-e), mulInt(inWindow, P)).Cmp(mulInt(L, P)) > 0
		}
		if over {
			return fmt.Errorf("%d units at %d: %d in its window (%d in the one before)", a.n, a.at, inWindow, prev)
		}
	}
	return nil
}

// gcraConform checks acts, in time order, against GCRA with T =
// PERIOD/LIMIT and tau = B*T, in units of 1/LIMIT ns: an act of n at a
// passes iff max(TAT, a) + n*T - a <= tau, and then TAT = max(TAT, a) +
// n*T.
func gcraConform(p algo.Policy, acts []act) error {
	P, L := int64(p.Period()), p.Limit()
	tau := mulInt(p.Burst(), P)
	tat := new(big.Int)
	for _, a := range acts {
		at := mulInt(a.at, L)
		if tat.Cmp(at) < 0 {
			tat.Set(at)
		}
		tat.Add(tat, mulInt(a.n, P))
		if over := new(big.Int).Sub(tat, at); over.Cmp(tau) > 0 {
			return fmt.Errorf("%d units at %d: the bucket would hold %v/%d ns, more than its burst of %v", a.n, a.at, over, L, tau)
		}
	}
	return nil
}

func mulInt(a, b int64) *big.Int { return new(big.Int).Mul(big.NewInt(a), big.NewInt(b)) }
