package floodgate

import (
	"context"
	"sync"

	"github.com/floodgate/floodgate/store"
)

// A Reservation holds units that a caller has been admitted to spend but
// may still give back: reserve, then either Commit (the units are spent) or
// Cancel (they are returned as far as later requests allow). It is BDE's
// reserve / submitReserved / cancelReserved, and x/time/rate's
// Reservation for requests admitted now.
//
// A Reservation is safe for concurrent use; only the first Commit or
// Cancel has an effect.
type Reservation struct {
	l  *Limiter
	op store.Op // the op that reserved: Cancel refunds what it spent
	d  Decision

	mu   sync.Mutex
	done bool
}

// Reserve decides, like AllowN, whether key may spend n units now, and
// holds them if so. The Reservation's Decision tells whether it was
// admitted; a denied one holds nothing. The error is AllowN's.
func (l *Limiter) Reserve(ctx context.Context, key string, n int64) (*Reservation, error) {
	ops := []store.Op{{Kind: store.OpDecide, Table: l.table, Key: key, Now: l.now(), N: n}}
	err := l.apply(ctx, ops)
	op := &ops[0]
	if err == nil {
		err = op.Result.Err
	}
	d, err := l.decision(op.Result.Decision, err)
	return &Reservation{l: l, op: *op, d: d}, err
}

// Decision returns the decision on the reservation.
func (r *Reservation) Decision() Decision { return r.d }

// OK reports whether the reservation was admitted.
func (r *Reservation) OK() bool { return r.d.Allowed }

// Commit spends the reserved units for good; a later Cancel does nothing.
func (r *Reservation) Commit() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
}

// Cancel gives the reserved units back. They are returned as far as the
// time and the requests since the reservation allow (algo.Policy.Refund):
// a bucket gets back the part not yet drained, a window or log loses the
// units while it still counts them. Cancel never lets the key admit more
// than if the reservation had not been made. It does nothing after Commit,
// a previous Cancel, or for a reservation that was denied.
func (r *Reservation) Cancel(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	refund, held := r.op.Refund(r.l.now())
	if r.done || !held {
		r.done = true
		return nil
	}
	err := r.l.apply(ctx, []store.Op{refund})
	if err == nil {
		r.done = true
	}
	return err
}
