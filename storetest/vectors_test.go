package storetest

import (
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/reference"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.txt from package algo")

// vectorPolicies are the policies of the golden vectors: every algorithm,
// emission intervals that are not whole nanoseconds, long periods, and
// counts past 32 bits up to algo.MaxLimit (a 10 Gbit/s link's bytes).
var vectorPolicies = []string{
	"token-bucket 3/1s burst=5",
	"token-bucket 7/2s burst=7",
	"token-bucket 1000/7ms burst=20",
	"leaky-bucket 1/1h capacity=20",
	"leaky-bucket 3/1s capacity=4",
	"sliding-log 2/10s",
	"sliding-log 5/1m",
	"sliding-window 3/500ms",
	"sliding-window 10/1h",
	"fixed-window 3/1s",
	"fixed-window 100/24h",
	"token-bucket 1250000000/1s burst=4294967296",
	"leaky-bucket 1000000000000000/1h capacity=999999999999999",
	"sliding-log 524288/1s",
	"sliding-window 1000000000000000/8784h",
	"sliding-window 4294967296/7ms",
	"fixed-window 1000000000000000/1s",
}

// edgeVectorPolicies are at the bounds of the Redis script's wide bucket
// path: LIMIT 2^32-1, burst 2^32, costs up to the burst, periods up to 366
// days, and 13/24h and 14/24h, either side of its old threshold (tau of
// 2^50 units); a month's fixed window, on its long path; sliding windows
// past LIMIT*PERIOD 2^50, up to LIMIT 2^32-1 and PERIOD 52 days, and
// sliding logs past PERIOD 2^50 ns, on their wide paths.
var edgeVectorPolicies = []string{
	"token-bucket 4294967295/8784h",
	"leaky-bucket 4294967295/8784h capacity=4294967296",
	"token-bucket 13/24h",
	"token-bucket 14/24h",
	"token-bucket 1000/720h",
	"fixed-window 1000/720h",
	"sliding-window 1000/24h",
	"sliding-window 10000/1h",
	"sliding-window 4294967295/1248h",
	"sliding-window 7/1250h",
	"sliding-log 1000/720h",
	"sliding-log 3/8784h",
}

// genVectors decides a random trace for each policy with package algo,
// starting at a small time and at a realistic one (2026); the edge
// policies' at 2026 and near algo.MaxTime, their times capped there.
func genVectors() []Vector {
	var out []Vector
	for i, s := range append(vectorPolicies[:len(vectorPolicies):len(vectorPolicies)], edgeVectorPolicies...) {
		p := algo.MustParsePolicy(s)
		starts, last := []int64{0, t0}, int64(algo.MaxTime)
		if i >= len(vectorPolicies) {
			starts = []int64{t0, algo.MaxTime - 8*int64(p.Period())}
		}
		for j, start := range starts {
			rng := rand.New(rand.NewPCG(uint64(i), uint64(j)))
			states := map[string]*algo.State{}
			v := Vector{Policy: p}
			t := start
			P := int64(p.Period())
			for range 120 {
				switch x := rng.IntN(10); {
				case x < 2: // same instant
				case x < 5:
					t += rng.Int64N(P/max(p.Limit(), 1) + 2)
				case x < 8:
					t += rng.Int64N(P + 1)
				default: // a window boundary, +-1
					t = (t/P+1)*P + rng.Int64N(3) - 1
				}
				t = min(t, last)
				key := []string{"a", "b", "user:42"}[rng.IntN(3)]
				var n int64
				switch x := rng.IntN(10); {
				case x < 1:
					n = 0
				case x < 2:
					n = p.Burst() + 1
				default:
					n = 1 + rng.Int64N(min(p.Burst(), 3))
					if p.Burst() >= math.MaxUint32 { // costs of every size
						n = 1 + rng.Int64N(p.Burst())
					}
				}
				st := states[key]
				if st == nil {
					st = new(algo.State)
					states[key] = st
				}
				d, err := p.Decide(st, t, n)
				v.Steps = append(v.Steps, Step{T: t, Key: key, N: n, Want: d, WantErr: err != nil})
			}
			out = append(out, v)
		}
	}
	return out
}

func formatVectors(vs []Vector) string {
	var b strings.Builder
	b.WriteString("# floodgate store conformance vectors, written by `go test ./storetest -update`.\n")
	b.WriteString("# T KEY N -> ALLOWED REMAINING RETRY_AFTER RESET_AFTER (nanoseconds; see Vectors).\n")
	for _, v := range vs {
		fmt.Fprintf(&b, "\npolicy %v\n", v.Policy)
		for _, st := range v.Steps {
			b.WriteString(formatStep(st))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// TestVectorsGolden checks that the vectors file is what package algo
// decides now: a change of algo that changes a decision fails here until
// the vectors are rewritten with -update, and then every store must
// follow.
func TestVectorsGolden(t *testing.T) {
	want := formatVectors(genVectors())
	if *update {
		if err := os.WriteFile("testdata/vectors.txt", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if vectorsText != want && !*update {
		t.Fatal("testdata/vectors.txt differs from what package algo decides; if algo changed on purpose, run go test ./storetest -update")
	}
}

// TestVectorsAgreeWithReference checks every vector against the
// independent exact model.
func TestVectorsAgreeWithReference(t *testing.T) {
	vs, err := Vectors()
	if err != nil {
		t.Fatal(err)
	}
	steps := 0
	for _, v := range vs {
		p := v.Policy
		m := reference.New(p.Algorithm().String(), p.Limit(), int64(p.Period()), p.Burst())
		for _, st := range v.Steps {
			steps++
			r := m.Decide(reference.Event{T: st.T, Key: st.Key, N: st.N})
			ceil := func(x *big.Rat) time.Duration {
				if x == nil {
					return 0
				}
				return time.Duration(reference.CeilNanos(x))
			}
			retry := ceil(r.RetryAfter)
			if r.Never {
				retry = algo.Never
			}
			got := algo.Decision{Allowed: r.Allowed, Remaining: r.Remaining, RetryAfter: retry, ResetAfter: ceil(r.ResetAfter)}
			if got != st.Want || r.Never != st.WantErr {
				t.Fatalf("line %d (%v): file says %s, the reference model %+v", st.Line, p, formatStep(st), got)
			}
		}
	}
	if steps < 2000 {
		t.Fatalf("only %d vector steps", steps)
	}
}

func TestParseVectorsErrors(t *testing.T) {
	for _, bad := range []string{
		"0 a 1 -> 1 0 0 0",
		"policy nonsense 1/1s",
		"policy fixed-window 1/1s\n0 a 1 -> 1 0 0",
		"policy fixed-window 1/1s\nx a 1 -> 1 0 0 0",
		"policy fixed-window 1/1s\n0 a 1 => 1 0 0 0",
	} {
		if _, err := parseVectors(bad); err == nil {
			t.Errorf("parseVectors(%q) accepted it", bad)
		}
	}
}
