package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Errors of the Redis store, wrapped with details; test for them with
// errors.Is. The store also returns the floodgate sentinels for bad input
// (algo.ErrInvalidTime, ErrInvalidCost, ErrForeignTable), and wraps
// the client's errors when Redis fails.
var (
	// ErrInvalidOption is returned by New for an option out of range.
	ErrInvalidOption = errors.New("invalid option")
	// ErrOverloaded is returned when more calls wait for a batch than the
	// store allows (10,000): Redis is slower than the calls arrive. A
	// floodgate.Failsafe store treats it as Redis failing.
	ErrOverloaded = errors.New("too many calls waiting for Redis")
	// ErrUnavailable is returned when Redis does not answer a call: the
	// client could not reach it (its error wrapped too), or Redis has not
	// answered within the store's timeout (WithTimeout) or by the call's
	// deadline, whichever came first (context.DeadlineExceeded wrapped
	// too). The caller returns then, however long Redis stalls, and the
	// call may still take effect, its results lost. It is returned too
	// when Redis loses the store's code (FUNCTION FLUSH, SCRIPT FLUSH)
	// right after each of the store's loads of it, 4 in a row: such a call
	// was not carried out. A call whose context
	// is cancelled returns context.Canceled instead, and an error that
	// Redis answers (a script's, a cluster's) is wrapped as it is.
	ErrUnavailable = errors.New("no answer from Redis")
	// ErrCorrupt is returned when Redis answers something the store did
	// not write: another program wrote to the store's keys, or the
	// script's reply is not what this version of the store expects.
	ErrCorrupt = errors.New("unexpected data in Redis")
)

// callErr is the store's error for a call to Redis that failed with err:
// an error Redis answered, or a cancelled context, as it is; else Redis
// did not answer, which wraps ErrUnavailable and has the Cluster's layout
// reloaded (a master may have gone).
func (s *Store) callErr(err error) error {
	var reply redis.Error
	if !errors.As(err, &reply) && !errors.Is(err, context.Canceled) {
		s.reloadLayout()
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("redisstore: %w", err)
}
