package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
)

// simulate --store redis://… and redis-cluster://… write exactly what
// simulate on memory writes, for every algorithm, on the example trace and
// on a random trace of many keys, costs and gaps; and leave no key behind.
func TestSimulateOnRedisIsByteIdentical(t *testing.T) {
	srv := redistest.SharedServer(t)
	cluster := redistest.SharedCluster(t)
	stores := []string{srv.URL(), "redis-cluster://" + strings.Join(cluster.Addrs(), ",")}

	random := filepath.Join(t.TempDir(), "random.trace")
	var b strings.Builder
	r := rand.New(rand.NewPCG(3, 4))
	t0 := int64(1_795_305_600_000_000) // µs
	for range 3000 {
		t0 += int64(r.ExpFloat64() * 40_000)
		fmt.Fprintf(&b, "%d.%06d user%d %d\n", t0/1e6, t0%1e6, r.IntN(40), r.IntN(4))
	}
	if err := os.WriteFile(random, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	traces := []string{"../../examples/traces/burst.trace", random}
	policies := []string{
		"token-bucket 5/1s burst=10", "leaky-bucket 3/1s capacity=7", "sliding-log 8/2s",
		"sliding-window 10/1500ms", "fixed-window 12/1s",
		"token-bucket 999999937/8760h burst=999999999", "sliding-window 1000000000/8784h", "fixed-window 3/7ns",
	}
	for _, tr := range traces {
		for _, p := range policies {
			want := simulateOut(t, "--policy", p, tr)
			for _, store := range stores {
				if got := simulateOut(t, "--policy", p, "--store", store, tr); got != want {
					t.Errorf("%s on %s, --store %s: output differs from memory's at %s", filepath.Base(tr), p, store, firstDiff(want, got))
				}
			}
		}
	}
	if n := srv.Client(t).Keys(t.Context(), "floodgate:simulate:*").Val(); len(n) > 0 {
		t.Errorf("%d keys left behind: %v", len(n), n[:min(len(n), 5)])
	}
}

func simulateOut(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(append([]string{"simulate"}, args...), strings.NewReader(""), &out, &errOut); code != exitOK {
		t.Fatalf("simulate %q: exit %d: %s", args, code, errOut.String())
	}
	return out.String()
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return fmt.Sprintf("line %d:\n  memory %s\n  redis  %s", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("length %d vs %d lines", len(la), len(lb))
}

func TestSimulateStoreErrors(t *testing.T) {
	for _, c := range []struct {
		store string
		code  int
		msg   string
	}{
		{"memcached://x", exitUsage, `floodgate simulate: --store: invalid store URL: "memcached://x": want memory`},
		{"redis-cluster://nohostport", exitUsage, `address "nohostport" is not HOST:PORT`},
		// Nothing listens on port 1: the first decision fails, at its
		// first command (a read of its name's policies).
		{"redis://127.0.0.1:1?dial_timeout=200ms&max_retries=-1", exitFailure, "floodgate simulate: line 1: redisstore: no answer from Redis: "},
	} {
		var out, errOut bytes.Buffer
		code := run([]string{"simulate", "--policy", "token-bucket 1/1s", "--store", c.store}, strings.NewReader("0 a\n"), &out, &errOut)
		if code != c.code || !strings.Contains(errOut.String(), c.msg) || c.code == exitFailure && !strings.Contains(errOut.String(), "dial tcp 127.0.0.1:1") {
			t.Errorf("--store %s: exit %d, stderr %q; want exit %d and %q", c.store, code, errOut.String(), c.code, c.msg)
		}
	}
}
