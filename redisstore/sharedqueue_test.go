package redisstore_test

import (
	"fmt"
	"testing"

	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/storetest"
)

// Two stores on one real redis-server, each with a client of its own, as
// two processes would have them, keep one queue for Limiter.Delay:
// storetest's SharedQueue, at the caller's (fake) time.
func TestSharedQueue(t *testing.T) {
	srv := testServer(t)
	prefix := redisstore.WithPrefix(fmt.Sprintf("test%d:", prefixes.Add(1))) // after newStore's own: it wins
	a := newStore(t, srv.Client(t), prefix, redisstore.WithCallerTime())
	b := newStore(t, srv.Client(t), prefix, redisstore.WithCallerTime())
	storetest.SharedQueue(t, a, b)
}
