package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// go-redis's ClusterClient.MasterForKey reads its context only when it
// loads the cluster's layout, which batcherOf and the deny cache's
// trackers rely on (cachedLayout): with no layout loaded, a lookup with
// a done context fails at once, even with every node stalled; with one
// loaded, it answers from it, at once, even with every node stalled.
func TestGoRedisMasterForKeyReadsLayoutHeld(t *testing.T) {
	cl := redistest.NewCluster(t)
	cc := cl.Client(t)
	stalled := func(f func()) {
		for i := range cl.Servers() {
			cl.Pause(i)
		}
		defer func() {
			for i := range cl.Servers() {
				cl.Resume(i)
			}
		}()
		f()
	}
	stalled(func() {
		start := time.Now()
		m, err := cc.MasterForKey(cachedLayout, "k")
		if took := time.Since(start); err == nil || took > time.Second {
			t.Errorf("go-redis: MasterForKey with a done context and no layout loaded, every node stalled: %v %v after %v, want an error at once", m, err, took)
		}
	})
	want := map[string]*redis.Client{}
	for i := range 64 {
		k := fmt.Sprint("k", i)
		m, err := cc.MasterForKey(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		want[k] = m
	}
	stalled(func() {
		start := time.Now()
		for k, w := range want {
			if m, err := cc.MasterForKey(cachedLayout, k); err != nil || m != w {
				t.Fatalf("go-redis: MasterForKey with a done context, every node stalled: %v %v, want the master of the layout held, %v", m, err, w)
			}
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("go-redis: 64 lookups in the layout held, every node stalled, took %v: want no I/O", took)
		}
	})
}
