package memstore_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate"
)

// A restart that keeps the limits: the old process writes a snapshot of its
// memory store, the new one reads it before deciding.
func ExampleStore_WriteSnapshot() {
	ctx := context.Background()
	t := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	sms := algo.MustParsePolicy("leaky-bucket 1/1h capacity=20")

	before := memstore.New(0)
	l := floodgate.Must(floodgate.NewLimiter(sms, floodgate.WithStore(before)))
	for range 18 {
		l.AllowAt(ctx, "sms", t, 1)
	}
	var snapshot bytes.Buffer // a file, in floodgate serve
	if err := before.WriteSnapshot(&snapshot, t.UnixNano()); err != nil {
		fmt.Println(err)
		return
	}

	after := memstore.New(0)
	if err := after.ReadSnapshot(&snapshot, t.Add(time.Minute).UnixNano()); err != nil {
		fmt.Println(err)
		return
	}
	l = floodgate.Must(floodgate.NewLimiter(sms, floodgate.WithStore(after)))
	d, _ := l.AllowAt(ctx, "sms", t.Add(time.Minute), 0)
	fmt.Println("remaining after the restart:", d.Remaining)
	// Output:
	// remaining after the restart: 2
}
