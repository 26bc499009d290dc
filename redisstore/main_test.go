package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/redis/go-redis/v9"
)

// The tests run against a real redis-server that they start themselves
// (internal/redistest), and skip without one unless CI is set.
func TestMain(m *testing.M) {
	// The failure tests kill Redis: go-redis would log every failed dial.
	redis.SetLogger(quiet{})
	redistest.Main(m)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// testClient returns a client of the package's shared Redis.
func testClient(t testing.TB) *redis.Client {
	return redistest.SharedServer(t).Client(t)
}

var prefixes atomic.Int64

// newStore returns a store on c whose keys no other test shares.
func newStore(t testing.TB, c redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	opts = append([]redisstore.Option{redisstore.WithPrefix(fmt.Sprintf("test%d:", prefixes.Add(1)))}, opts...)
	s, err := redisstore.New(c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testServer returns the package's shared Redis server.
func testServer(t testing.TB) *redistest.Server { return redistest.SharedServer(t) }
