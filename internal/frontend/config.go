package frontend

import (
	"context"
	"log/slog"
	"time"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/logthrottle"
)

// Config holds the options both front-ends take, over their request type
// R (an *http.Request, a gRPC call). Each front-end's options set it.
type Config[R any] struct {
	Key       func(R) (string, error) // the key of limits without one of their own
	Cost      func(R) int64           // the cost of limits without one; nil: N
	N         int64                   // the cost when Cost is nil; 1 by default
	Name      string                  // the limit's name, for New
	Skips     []func(R) bool          // requests let through untouched
	OnLimited func(R, floodgate.Decision)
	Log       *slog.Logger
	MaxWait   time.Duration // WithDelay's; 0: refuse at once
}

// Core is what a front-end holds of its options at run time, with its
// counts and its error log. Its methods are safe for concurrent use.
type Core[R any] struct {
	Config[R]
	Counts
	logs logthrottle.Throttle // one error line a second
}

// NewCore returns the Core of c, logging to slog.Default() if c has no
// logger.
func NewCore[R any](c Config[R]) *Core[R] {
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return &Core[R]{Config: c}
}

// Skipped reports whether a WithSkip function lets r through.
func (c *Core[R]) Skipped(r R) bool {
	for _, skip := range c.Skips {
		if skip(r) {
			return true
		}
	}
	return false
}

// LogError logs err at level Error with attrs, at most once a second; the
// line counts the errors not logged since the last.
func (c *Core[R]) LogError(ctx context.Context, msg string, err error, attrs ...slog.Attr) {
	unlogged, ok := c.logs.Allow()
	if !ok {
		return
	}
	attrs = append(attrs, slog.String("error", err.Error()), slog.Uint64("unlogged", unlogged))
	c.Log.LogAttrs(ctx, slog.LevelError, msg, attrs...)
}

// Limit is one limit of a front-end, ready to use.
type Limit[R any] struct {
	Limiter *floodgate.Limiter
	Key     func(R) (string, error) // nil: the Core's
	Cost    func(R) int64           // nil: N
	N       int64
	Name    string
	DryRun  bool // the limiter's
}

// NewLimit returns the Limit of l named name, with key and cost, or when
// nil the Config's.
func NewLimit[R any](l *floodgate.Limiter, key func(R) (string, error), cost func(R) int64, name string, c *Config[R]) Limit[R] {
	lim := Limit[R]{Limiter: l, Key: key, Cost: cost, N: 1, Name: name, DryRun: l.DryRun()}
	if cost == nil {
		lim.Cost, lim.N = c.Cost, c.N
	}
	return lim
}

// Fill sets d.Checks[i] for each limit(i): its limiter, r's key (the
// limit's key function, else the Core's, called at most once for all the
// limits that use it) and r's cost. It returns a key function's error.
func (c *Core[R]) Fill(d *Decided, limit func(i int) *Limit[R], r R) error {
	var def string
	var haveDef bool
	for i := range d.Checks {
		lim := limit(i)
		var key string
		var err error
		switch {
		case lim.Key != nil:
			key, err = lim.Key(r)
		case haveDef:
			key = def
		default:
			def, err = c.Key(r)
			key, haveDef = def, true
		}
		if err != nil {
			return err
		}
		n := lim.N
		if lim.Cost != nil {
			n = lim.Cost(r)
		}
		d.Checks[i] = floodgate.Check{Limiter: lim.Limiter, Key: key, N: n, Peek: n == 0}
	}
	return nil
}
