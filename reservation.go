package floodgate

import (
	"context"
	"sync"
	"time"

	"github.com/floodgate/floodgate/store"
)

// A Reservation holds units that a caller has been admitted to spend but
// may still give back: reserve, then either Commit (the units are spent) or
// Cancel (they are returned as far as later requests allow). It is BDE's
// reserve / submitReserved / cancelReserved, and x/time/rate's
// Reservation. Reserve admits now; Schedule may admit for later, after the
// Reservation's Delay.
//
// A Reservation is safe for concurrent use; only the first Commit or
// Cancel has an effect.
type Reservation struct {
	l     *Limiter
	op    store.Op // the op that reserved: Cancel refunds what it spent
	d     Decision
	delay time.Duration

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

// Schedule is Reserve for a caller that may wait its turn, without
// waiting: it admits n units of key now if AllowN would, and otherwise, for
// a token or leaky bucket, if they fit within maxWait, admits them for the
// earliest time they fit, holding them in the store from now on so that
// later requests queue behind them (algo.Policy.Schedule). Delay says how
// long the caller must wait before acting; on a bucket, WaitN is Schedule
// followed by that wait. A maxWait of 0 or less, or the window and log algorithms,
// which cannot hold units for later, admit only at once, as Reserve does.
// The limiter's WithMaxWait, when set, bounds maxWait; WithMaxQueue does
// not apply, as nothing waits in this process.
//
// A request that would wait longer is denied (Decision.RetryAfter is the
// wait it needed) and holds nothing; the error is AllowN's. In dry-run
// mode Schedule is Reserve.
func (l *Limiter) Schedule(ctx context.Context, key string, n int64, maxWait time.Duration) (*Reservation, error) {
	if l.dryRun {
		return l.Reserve(ctx, key, n)
	}
	if l.maxWait > 0 {
		maxWait = min(maxWait, l.maxWait)
	}
	op, err := l.schedule(ctx, key, l.now(), n, maxWait)
	if err == nil {
		err = op.Result.Err
	}
	d, err := l.decision(op.Result.Decision, err)
	r := &Reservation{l: l, op: op, d: d}
	if d.Allowed {
		r.delay = max(time.Duration(op.Result.At-op.Now), 0)
	}
	return r, err
}

// Decision returns the decision on the reservation.
func (r *Reservation) Decision() Decision { return r.d }

// Delay is how long after the reservation was made its units may be used:
// 0 for one admitted at once, or denied.
func (r *Reservation) Delay() time.Duration { return r.delay }

// OK reports whether the reservation was admitted.
func (r *Reservation) OK() bool { return r.d.Allowed }

// Commit spends the reserved units for good; a later Cancel does nothing.
func (r *Reservation) Commit() {
	r.mu.Lock()
	r.done = true
	r.mu.Unlock()
}

// Cancel gives the reserved units back, as far as the time and the
// requests since the reservation allow (algo.Policy.Refund): a window or
// log loses the units while it still counts them; a bucket gets back the
// part not yet drained only when no request was admitted after this one,
// and otherwise nothing, since those requests keep the instants they were
// given and the next one would act beside them. So Cancel never lets the
// key admit more than its policy allows, nor more than if the
// reservation had not been made, and the requests queued behind a
// cancelled one do not go sooner. It does nothing after Commit, a
// previous Cancel, or for a reservation that was denied.
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
