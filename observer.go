package floodgate

import (
	"context"
	"errors"
)

// An Observer is told of each request a Limiter decides, for metrics:
// package prommetrics's Collector makes Observers that count decisions
// for Prometheus. A limiter made WithObserver calls Observe once per
// request, on the caller's goroutine, after deciding and before
// returning: from Allow, AllowN, AllowAt, Reserve and Schedule, for each of its
// checks in AllowAll and AllowEach, and from Wait.
//
// d and err are what the caller gets: an admission (a dry-run one with
// d.DryRun set), a denial (over the burst: with an error wrapping
// algo.ErrCostExceedsBurst), or a failure, whose err is the input's or
// the store's. In AllowAll, where one limit's denial or failure admits
// nothing, each limiter observes the request's outcome: d.Allowed is
// true only if the whole request was admitted, and err is the request's
// error; a limiter in dry-run mode is decided, and observes its own
// decision, only when the others admitted. A Wait is observed when it returns, admitted (d.Allowed, and no
// more of d) or with its error (ErrWaitTooLong and ErrQueueFull are
// refusals); Delay is observed with the decision it returns. One that
// ends because its context did is not observed.
// Peeks (a cost of 0) are observed like any decision; Reset is not.
//
// Observe must be safe for concurrent use, fast (it adds to every
// decision's cost), and must not call the Limiter.
type Observer interface {
	Observe(d Decision, err error)
}

// WithObserver makes the limiter tell o of every request it decides (see
// Observer). Without it, observing costs a decision one comparison.
func WithObserver(o Observer) Option { return optionFunc(func(c *config) { c.observer = o }) }

// observeAll tells the observers of md's checks the outcome of AllowAll:
// each check's Decision, admitted only if the request was. Limiters in
// dry-run mode observed their own decision (AllowN).
func observeAll(checks []Check, md *MultiDecision, err error) {
	for i, c := range checks {
		if c.Limiter == nil || c.Limiter.obs == nil || c.Limiter.dryRun {
			continue
		}
		d := md.Decisions[i]
		if d.policy == nil {
			d.policy = &c.Limiter.policy
		}
		d.Allowed = md.Allowed
		c.Limiter.obs.Observe(d, err)
	}
}

// observeWait tells the limiter's observer how a WaitN ended, unless it
// ended because ctx did.
func (l *Limiter) observeWait(ctx context.Context, err error) {
	if l.obs == nil || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
		return
	}
	l.obs.Observe(Decision{Allowed: err == nil, policy: &l.policy}, err)
}
