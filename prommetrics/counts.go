package prommetrics

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// Counts counts the decisions of the limiters given it as their
// floodgate.Observer (Collector.Observer makes them). Admissions and
// denials are counted in stripes, so that goroutines deciding at once on
// many cores seldom write to one cache line; each count is their sum.
type Counts struct {
	stripes   [nStripes]stripe
	dryRun    atomic.Uint64 // would-be denials admitted in dry-run mode
	errs      atomic.Uint64 // failed decisions: bad input and failing stores
	storeErrs atomic.Uint64 // failed decisions that were not bad input
}

// nStripes is how many stripes a Counts has: a power of two, a few times
// the cores of a large machine.
const nStripes = 32

// stripe is one stripe of a Counts' admissions and denials, padded to 64
// bytes so that no two stripes share a cache line.
type stripe struct {
	allowed, denied atomic.Uint64
	_               [48]byte
}

// Observe counts one decision: admitted, denied, admitted by dry-run mode,
// or failed (see floodgate.Observer).
func (o *Counts) Observe(d floodgate.Decision, err error) {
	if err != nil {
		o.observeErr(err)
		return
	}
	switch s := &o.stripes[rand.Uint32()%nStripes]; {
	case d.DryRun:
		o.dryRun.Add(1)
	case d.Allowed:
		s.allowed.Add(1)
	default:
		s.denied.Add(1)
	}
}

// observeErr counts a decision that came with an error: a denial (a cost
// above the burst, a refused Wait) or a failure.
func (o *Counts) observeErr(err error) {
	switch {
	case errors.Is(err, algo.ErrCostExceedsBurst), errors.Is(err, floodgate.ErrWaitTooLong), errors.Is(err, floodgate.ErrQueueFull):
		o.stripes[0].denied.Add(1)
		return
	case errors.Is(err, algo.ErrInvalidCost), errors.Is(err, algo.ErrInvalidTime), errors.Is(err, store.ErrInvalidKey):
	default:
		o.storeErrs.Add(1)
	}
	o.errs.Add(1)
}

// load returns the admissions and denials counted so far.
func (o *Counts) load() (allowed, denied uint64) {
	for i := range o.stripes {
		allowed += o.stripes[i].allowed.Load()
		denied += o.stripes[i].denied.Load()
	}
	return allowed, denied
}
