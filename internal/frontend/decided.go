package frontend

import (
	"context"
	"time"

	"github.com/floodgate/floodgate"
)

// Decided is the context of a request as its limits decide it: it carries
// the decision (From) and holds, in one allocation, what a request on one
// limit needs.
type Decided struct {
	context.Context
	MD      floodgate.MultiDecision
	Checks  []floodgate.Check // one per limit, in the order of MD.Decisions
	Binding int               // the index of the limit that binds (see Binding)
	one     [1]floodgate.Decision
	check   [1]floodgate.Check
}

type decidedKey struct{}

// Init readies d for a request with context ctx on n limits: its Checks
// ready to fill.
func (d *Decided) Init(ctx context.Context, n int) {
	d.Context = ctx
	if n == 1 {
		d.Checks = d.check[:]
	} else {
		d.Checks = make([]floodgate.Check, n)
	}
}

// Value implements context.Context: the key of From gives d.
func (d *Decided) Value(key any) any {
	if _, ok := key.(decidedKey); ok {
		return d
	}
	return d.Context.Value(key)
}

// From returns the Decided that ctx is or wraps, if any.
func From(ctx context.Context) (*Decided, bool) {
	d, ok := ctx.Value(decidedKey{}).(*Decided)
	return d, ok
}

// Decide decides d.Checks into d.MD and sets d.Binding: one limit by its
// Delay (which is AllowN when maxWait is 0), several all or nothing by
// floodgate.AllowAll. It returns the limiters' error, d.MD set even then.
func (d *Decided) Decide(maxWait time.Duration) error {
	var err error
	if len(d.Checks) != 1 {
		d.MD, err = floodgate.AllowAll(d.Context, d.Checks...)
	} else {
		c := d.Checks[0]
		d.one[0], err = c.Limiter.Delay(d.Context, c.Key, c.N, maxWait)
		d.MD = floodgate.MultiDecision{Allowed: d.one[0].Allowed, Denied: -1, Decisions: d.one[:]}
		if !d.one[0].Allowed {
			d.MD.RetryAfter, d.MD.Denied = d.one[0].RetryAfter, 0
		}
	}
	d.Binding = Binding(&d.MD)
	return err
}

// Bound returns the decision of the limit that binds.
func (d *Decided) Bound() floodgate.Decision { return d.MD.Decisions[d.Binding] }

// Binding returns the index of the limit that binds: the one that denied
// with the longest wait, else the one with the least remaining.
func Binding(md *floodgate.MultiDecision) int {
	if !md.Allowed && md.Denied >= 0 {
		return md.Denied
	}
	b := 0
	for i := 1; i < len(md.Decisions); i++ {
		if md.Decisions[i].Remaining < md.Decisions[b].Remaining {
			b = i
		}
	}
	return b
}
