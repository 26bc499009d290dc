package algo

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestBucketTickMatchesGeneral holds bucketTick, the buckets' path for a
// whole-nanosecond T, to the general path in units of 1/LIMIT ns: on random
// policies, states, times and costs, across the whole range of each, the
// Decision and the State after it must be the same.
func TestBucketTickMatchesGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 3))
	for i := range 200_000 {
		p := randomTickPolicy(rng)
		if p.tick == 0 {
			t.Fatalf("policy %v: no tick", p)
		}
		general := p
		general.tick = 0
		s := State{alg: p.alg, t: randomTAT(rng, p)}
		now := randomNow(rng, s.t)
		n := randomCost(rng, p.burst)

		fast, slow := s, s
		df := p.bucket(&fast, now, n)
		ds := general.bucket(&slow, now, n)
		if df != ds || fast != slow {
			t.Fatalf("case %d: %v, state t=%d, now %d, n %d:\nwhole-ns path %+v, state %+v\ngeneral path  %+v, state %+v",
				i, p, s.t, now, n, df, fast, ds, slow)
		}
	}
}

// randomTickPolicy returns a token-bucket or leaky-bucket policy whose T
// is a whole number of nanoseconds: small, at the bounds, or in between.
func randomTickPolicy(rng *rand.Rand) Policy {
	for {
		alg := TokenBucket
		if rng.IntN(2) == 0 {
			alg = LeakyBucket
		}
		limit := pick(rng, 1, MaxLimit)
		maxTick := int64(MaxPeriod) / limit
		if maxTick == 0 {
			continue
		}
		tick := pick(rng, 1, maxTick)
		var burst int64
		if rng.IntN(3) > 0 {
			burst = pick(rng, 1, MaxLimit)
		}
		p, err := New(alg, limit, time.Duration(limit*tick), burst)
		if err == nil {
			return p
		}
	}
}

// randomTAT returns a TAT (or a window's start) in the range a State may
// hold, a multiple of T when T is whole.
func randomTAT(rng *rand.Rand, p Policy) int64 {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return pick(rng, 0, MaxTime+int64(MaxDrain))
	}
	t := pick(rng, 0, MaxTime-1)
	if p.tick != 0 {
		t = t / p.tick * p.tick
	}
	return t
}

// randomNow returns a time in [0, MaxTime], often within a few drains of
// tat, before or after it.
func randomNow(rng *rand.Rand, tat int64) int64 {
	if rng.IntN(3) == 0 {
		return pick(rng, 0, MaxTime)
	}
	d := pick(rng, 0, int64(MaxDrain))
	if rng.IntN(2) == 0 {
		d = -d
	}
	return min(max(tat+d, 0), MaxTime)
}

// randomCost returns a cost in [0, burst]: 0, 1, burst, or any.
func randomCost(rng *rand.Rand, burst int64) int64 {
	switch rng.IntN(4) {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return burst
	}
	return pick(rng, 0, burst)
}

// pick returns a number in [lo, hi], with its order of magnitude uniform
// and the bounds themselves often.
func pick(rng *rand.Rand, lo, hi int64) int64 {
	switch rng.IntN(8) {
	case 0:
		return lo
	case 1:
		return hi
	}
	span := uint64(hi - lo)
	if span == 0 {
		return lo
	}
	bound := uint64(1) << rng.IntN(64)
	if bound == 0 || bound > span {
		bound = span
	}
	return lo + int64(rng.Uint64N(bound+1))
}

// TestDecideCellMatchesDecide holds DecideCell, and DecideTAT where it
// decides, to Decide on the State that the Cell holds: on random compact
// policies (buckets with a whole-ns T or not, windows), cells, times and
// costs (invalid ones too), the same Decision, error and State after it.
func TestDecideCellMatchesDecide(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 4))
	others := []Policy{
		MustParsePolicy("token-bucket 3/1s burst=5"),
		MustParsePolicy("leaky-bucket 7/2s capacity=3"),
		MustParsePolicy("token-bucket 4294967295/1s"),
		MustParsePolicy("sliding-window 7/3ns"),
		MustParsePolicy("fixed-window 2/3ns"),
		MustParsePolicy("fixed-window 100/1s"),
	}
	for i := range 200_000 {
		p := others[rng.IntN(len(others))]
		if rng.IntN(2) == 0 {
			if p = randomTickPolicy(rng); !p.Compact() {
				continue
			}
		}
		c := Cell{t: randomTAT(rng, p)}
		if p.tick == 0 || rng.IntN(4) == 0 {
			c.x = uint32(pick(rng, 0, min(p.limit, maxCell)))
			c.y = uint32(pick(rng, 0, min(p.limit, maxCell)))
		}
		now := randomNow(rng, c.t)
		n := randomCost(rng, p.burst)
		switch rng.IntN(16) {
		case 0:
			n = -1
		case 1:
			n = p.burst + 1
		case 2:
			now = MaxTime + 1
		}

		got := c
		d, err := p.DecideCell(&got, now, n)
		s := c.State(p.alg)
		wantD, wantErr := p.Decide(&s, now, n)
		want, _ := s.Cell()
		if d != wantD || got != want || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("case %d: %v, cell %+v, now %d, n %d:\nDecideCell %+v, %v, cell %+v\nDecide     %+v, %v, cell %+v",
				i, p, c, now, n, d, err, got, wantD, wantErr, want)
		}
		if c.x != 0 {
			continue
		}
		fast := p.tick != 0 && n > 0 && n <= p.burst && uint64(now) <= MaxTime
		if d, tat, ok := p.DecideTAT(c.t, now, n); ok != fast || ok && (d != wantD || tat != want.t || want.x != 0 || wantErr != nil) {
			t.Fatalf("case %d: %v, cell %+v, now %d, n %d:\nDecideTAT %+v, %d, %v\nDecide    %+v, %v, cell %+v",
				i, p, c, now, n, d, tat, ok, wantD, wantErr, want)
		}
	}
	log := MustParsePolicy("sliding-log 5/1s")
	var c Cell
	if _, err := log.DecideCell(&c, 1, 1); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("DecideCell with %v: error %v, want ErrInvalidPolicy", log, err)
	}
}
