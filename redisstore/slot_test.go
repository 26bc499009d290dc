package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/storetest"
)

// TestPartitions: on a cluster, a key's partition is the hash slot Redis
// itself gives its Redis key; a single Redis is one partition.
func TestPartitions(t *testing.T) {
	single := newStore(t, testClient(t))
	p := algo.MustParsePolicy("fixed-window 1/1m")
	tb, err := single.Table("api", p)
	if err != nil {
		t.Fatal(err)
	}
	if n, i := single.Partitions(), single.Partition(tb, "k"); n != 1 || i != 0 {
		t.Fatalf("a single Redis: %d partitions, key in %d; want 1 and 0", n, i)
	}
	c := redistest.SharedCluster(t).Client(t)
	cluster := newStore(t, c, redisstore.WithPrefix("slot:"))
	if n := cluster.Partitions(); n != 16384 {
		t.Fatalf("a cluster: %d partitions, want 16384", n)
	}
	tb, err = cluster.Table("api {x}", p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		key := fmt.Sprintf("user%d", i)
		if i%10 == 0 {
			key = fmt.Sprintf("{tag%d}:api", i)
		}
		want, err := c.ClusterKeySlot(ctx, redisstore.KeyOf(tb, key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := cluster.Partition(tb, key); int64(got) != want {
			t.Fatalf("Partition(%q) = %d, Redis's slot %d", key, got, want)
		}
	}
	other, _ := storetest.NewFlaky().Table("api", p)
	if i := cluster.Partition(other, "k"); i != 0 {
		t.Fatalf("a table of another store: partition %d, want 0", i)
	}
}
