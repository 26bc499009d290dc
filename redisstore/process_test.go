package redisstore_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/redisstore"
	"github.com/redis/go-redis/v9"
)

// Several processes, each with many goroutines, on one key of one Redis
// admit exactly what the policy allows: with Redis's clock (a sliding log
// whose entries do not expire during the test) and with the caller's (a
// token bucket at one fixed instant).
func TestProcessesShareExactly(t *testing.T) {
	srv := testServer(t)
	for _, c := range []struct {
		policy string
		caller bool
	}{
		{"sliding-log 300/24h", false},
		{"token-bucket 1/1h burst=300", true},
	} {
		t.Run(c.policy, func(t *testing.T) {
			const procs, goroutines, each = 4, 16, 10 // 640 attempts
			prefix := fmt.Sprintf("procs%d:", prefixes.Add(1))
			var total int
			var wg sync.WaitGroup
			var mu sync.Mutex
			for range procs {
				cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), "FLOODGATE_CHILD=1", "CHILD_NETWORK="+srv.Network(), "CHILD_ADDR="+srv.Addr(),
					"CHILD_PREFIX="+prefix, "CHILD_POLICY="+c.policy, "CHILD_CALLER="+strconv.FormatBool(c.caller),
					fmt.Sprintf("CHILD_WORK=%d,%d", goroutines, each))
				wg.Go(func() {
					out, err := cmd.CombinedOutput()
					if err != nil {
						t.Errorf("child: %v\n%s", err, out)
						return
					}
					_, rest, ok := strings.Cut(string(out), "admitted=")
					n, err := strconv.Atoi(strings.Fields(rest + " x")[0])
					if !ok || err != nil {
						t.Errorf("child said %q", out)
						return
					}
					mu.Lock()
					total += n
					mu.Unlock()
				})
			}
			wg.Wait()
			if total != 300 {
				t.Errorf("%d processes of %d goroutines admitted %d of %d, want exactly 300", procs, goroutines, total, procs*goroutines*each)
			}
		})
	}
}

// TestChildProcess is a child of TestProcessesShareExactly; it does
// nothing in an ordinary run.
func TestChildProcess(t *testing.T) {
	if os.Getenv("FLOODGATE_CHILD") != "1" {
		t.Skip("run by TestProcessesShareExactly")
	}
	c := redis.NewClient(&redis.Options{Network: os.Getenv("CHILD_NETWORK"), Addr: os.Getenv("CHILD_ADDR"), PoolSize: 32})
	defer c.Close()
	opts := []redisstore.Option{redisstore.WithPrefix(os.Getenv("CHILD_PREFIX"))}
	if os.Getenv("CHILD_CALLER") == "true" {
		opts = append(opts, redisstore.WithCallerTime())
	}
	s, err := redisstore.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var goroutines, each int
	fmt.Sscanf(os.Getenv("CHILD_WORK"), "%d,%d", &goroutines, &each)
	tb, err := s.Table("shared", algo.MustParsePolicy(os.Getenv("CHILD_POLICY")))
	if err != nil {
		t.Fatal(err)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				d, err := tb.Decide(ctx, "hot", 1795305600e9, 1)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("admitted=%d\n", admitted.Load())
}
