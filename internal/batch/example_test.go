package batch_test

import (
	"context"
	"fmt"

	"github.com/floodgate/floodgate/internal/batch"
)

// A store's send takes the calls whose callers still wait, and carries
// them out: here it doubles each call's number. A lone call goes at once,
// from the caller's goroutine.
func Example() {
	b := batch.New(func(_ context.Context, calls []*batch.Call[int]) {
		for _, c := range batch.Take(calls) {
			c.Work *= 2
		}
	}, batch.Limits{MaxBatch: 64, MaxInFlight: 2})
	c := &batch.Call[int]{Work: 21}
	if err := b.Do(context.Background(), c); err != nil {
		fmt.Println(err) // the context ended: c is no longer ours
		return
	}
	fmt.Println(c.Work, c.Err)
	// Output: 42 <nil>
}
