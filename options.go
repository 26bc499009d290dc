package floodgate

import (
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
)

// An Option configures a Limiter.
type Option interface{ apply(*config) }

type config struct {
	store    store.Store
	clock    clock.Clock
	name     string
	maxKeys  int
	dryRun   bool
	maxWait  time.Duration
	maxQueue int
	observer Observer
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithStore keeps the limiter's state in s instead of a memory store of its
// own. Limiters with the same name and policy on one store share state.
func WithStore(s store.Store) Option { return optionFunc(func(c *config) { c.store = s }) }

// WithClock reads time from c instead of the system clock: tests pass a
// clock.Fake, and the hottest paths may pass a clock.Coarse, which is
// faster to read but up to its resolution off (see clock.Coarse).
func WithClock(c clock.Clock) Option { return optionFunc(func(cfg *config) { cfg.clock = c }) }

// WithName names the limiter's keys in its store (the default name is the
// policy's string), so that limiters with equal policies but different
// purposes keep separate state on a shared store. A limiter made later
// under the same name with another policy (a reload that raises a limit)
// is that limiter's policy changed: on the memory and file stores each key
// keeps its spent units (algo.Policy.Convert).
func WithName(name string) Option { return optionFunc(func(c *config) { c.name = name }) }

// WithMaxKeys bounds the keys of the limiter's own memory store (default
// memstore.DefaultMaxKeys). It has no effect with WithStore; bound that store instead.
func WithMaxKeys(n int) Option { return optionFunc(func(c *config) { c.maxKeys = n }) }

// WithDryRun puts the limiter in dry-run (shadow) mode: every decision is
// made and counted as usual, but none denies. A request that would have
// been denied is admitted with Decision.DryRun set, and consumes nothing,
// so the state evolves exactly as if the limiter enforced its policy.
func WithDryRun(on bool) Option { return optionFunc(func(c *config) { c.dryRun = on }) }

// WithMaxWait bounds how long Wait may wait, like nginx's limit_req delay:
// a request that would wait longer is refused at once with ErrWaitTooLong.
// 0, the default, means no bound other than the context's deadline.
func WithMaxWait(d time.Duration) Option { return optionFunc(func(c *config) { c.maxWait = d }) }

// WithMaxQueue bounds how many callers may Wait on one key at a time in
// this limiter; one more is refused at once with ErrQueueFull. 0, the
// default, means no bound for Wait, and Delay's own bound for Delay on a
// window or log policy: the requests the policy admits within its maxWait.
func WithMaxQueue(n int) Option { return optionFunc(func(c *config) { c.maxQueue = n }) }
