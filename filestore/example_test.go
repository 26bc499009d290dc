package filestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/filestore"
)

// A program that runs again and again (a cron job, a CGI program) keeps
// its limit in a file: each run opens the store, decides, and closes it,
// and the next run, in another process, finds the units spent. Here three
// runs in a row may send two text messages, and one more each hour.
func Example_runs() {
	dir, err := os.MkdirTemp("", "filestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "state.db")
	policy := algo.MustParsePolicy("leaky-bucket 1/1h capacity=2")
	fc := clock.NewFake(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)) // omit WithClock in production

	for run := range 3 {
		s, err := filestore.Open(path)
		if err != nil {
			log.Fatal(err)
		}
		limiter := floodgate.Must(floodgate.NewLimiter(policy, floodgate.WithStore(s), floodgate.WithClock(fc)))
		d, err := limiter.Allow(context.Background(), "sms")
		s.Close()
		if err != nil {
			log.Fatal(err)
		}
		if d.Allowed {
			fmt.Printf("run %d: sent, %d left\n", run, d.Remaining)
		} else {
			fmt.Printf("run %d: not sent, try again in %v\n", run, d.RetryAfter)
		}
		fc.Advance(time.Minute)
	}
	// Output:
	// run 0: sent, 1 left
	// run 1: sent, 0 left
	// run 2: not sent, try again in 58m0s
}

// A long-running process (a server) that shares a file with others keeps
// a deny cache: a flood of requests over their limit is answered from
// memory, each with the Decision the file would give, and costs the file
// no transaction, until any process commits to it.
func ExampleWithDenyCache() {
	dir, err := os.MkdirTemp("", "filestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := filestore.Open(filepath.Join(dir, "state.db"), filestore.WithDenyCache(1<<20))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	fc := clock.NewFake(time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)) // omit WithClock in production
	limiter := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1m"),
		floodgate.WithStore(s), floodgate.WithClock(fc)))
	for range 1000 {
		if _, err := limiter.Allow(context.Background(), "client:42"); err != nil {
			log.Fatal(err)
		}
		fc.Advance(time.Millisecond)
	}
	st := s.CacheStats()
	fmt.Printf("%d decisions answered from the cache, %d key filled\n", st.Hits, st.Fills)
	// Output:
	// 997 decisions answered from the cache, 1 key filled
}
