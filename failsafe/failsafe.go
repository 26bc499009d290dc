package failsafe

import (
	"cmp"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/store"
)

// Mode says what a Store does while the store it wraps is failing.
type Mode uint8

// The failure modes. The zero Mode is FailClosed, which never admits
// more than the store would.
const (
	// FailClosed denies every request, with an error wrapping
	// ErrUnavailable and the store's error.
	FailClosed Mode = iota
	// FailOpen admits every request, counted in Stats.Open.
	FailOpen
	// FailLocal decides on a memory store of this process, on the table
	// with the same name and policy.
	FailLocal
)

var modeNames = [...]string{FailClosed: "closed", FailOpen: "open", FailLocal: "local"}

// String returns "closed", "open" or "local".
func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Options configures New. The zero value fails closed with the
// default durations.
type Options struct {
	// Mode is what to do while the store is failing; the zero value is
	// FailClosed.
	Mode Mode
	// Timeout bounds each call to the store, in real time: a call that
	// takes longer is cancelled and counts as a failure, even if the
	// caller's context has ended since. 0 means 100ms; a negative Timeout
	// means none (the store bounds its calls itself). Keep it shorter than
	// callers' deadlines: a call cut short by the caller's own context
	// (its deadline, sooner than the Timeout, or its cancellation) says
	// nothing about the store and is not a failure.
	Timeout time.Duration
	// Threshold is how many calls in a row, with no success in between,
	// must fail before a partition of the store goes down. 0 means 5.
	Threshold int
	// FailFor is how long calls must have been failing, from the first
	// failure of the run to the last, before a partition goes down, so
	// that a stall shorter than the Timeout plus FailFor takes nothing
	// down, however many calls it fails. 0 means 250ms; a negative
	// FailFor means no minimum (Threshold alone decides).
	FailFor time.Duration
	// Cooldown is how long, after a partition goes down, calls do not
	// reach it before one of them probes it; after a failed probe, the
	// next may go a Cooldown after the failed one began. 0 means 500ms,
	// so that the store is used again within half a second (and a probe's
	// round trip) of answering again.
	Cooldown time.Duration
	// MaxCooldown, if above Cooldown, makes each failed probe double the
	// cooldown, up to MaxCooldown; a recovery sets it back. 0 (or any
	// value up to Cooldown) means no doubling.
	MaxCooldown time.Duration
	// Local is FailLocal's store; nil means a new memstore.Store holding up
	// to memstore.DefaultMaxKeys keys per table. Other modes ignore it.
	Local *memstore.Store
	// Clock measures cooldowns; nil means the system clock. Tests pass a
	// clock.Fake.
	Clock clock.Clock
	// Logger, if not nil, logs each transition once: a Warn when the
	// store goes down, an Info when it is back. Requests are never logged.
	Logger *slog.Logger
}

// The defaults of Options.
const (
	defaultTimeout   = 100 * time.Millisecond
	defaultThreshold = 5
	defaultFailFor   = 250 * time.Millisecond
	defaultCooldown  = 500 * time.Millisecond
)

// Store is a store.Store that wraps another and keeps deciding, by its
// Mode, while that store is failing; the package documentation says how.
// Make one with New. A Store is safe for concurrent use; Stats counts what
// it did.
type Store struct {
	store       store.Store
	parts       store.Partitioned // nil: one partition
	mode        Mode
	timeout     time.Duration // 0: none
	threshold   int64
	failFor     time.Duration
	cooldown    time.Duration
	maxCooldown time.Duration
	local       *memstore.Store
	clock       clock.Clock // nil: the real clock
	log         *slog.Logger

	one       breaker                   // the breaker of the one partition, when parts is nil
	breakers  []atomic.Pointer[breaker] // by partition when parts is not nil, each made when first needed
	downParts atomic.Int64              // how many partitions are down
	stats     [nCounts]counter          // indexed by the count* constants
}

// New returns a Store wrapping s, configured by o (see Options for the
// defaults). It fails, with an error wrapping ErrInvalidOptions, for a nil
// s, an unknown Mode, or a negative Threshold or Cooldown.
func New(s store.Store, o Options) (*Store, error) {
	switch {
	case s == nil:
		return nil, fmt.Errorf("failsafe: %w: a nil store", ErrInvalidOptions)
	case o.Mode > FailLocal:
		return nil, fmt.Errorf("failsafe: %w: unknown %v", ErrInvalidOptions, o.Mode)
	case o.Threshold < 0:
		return nil, fmt.Errorf("failsafe: %w: Threshold %d is negative", ErrInvalidOptions, o.Threshold)
	case o.Cooldown < 0:
		return nil, fmt.Errorf("failsafe: %w: Cooldown %v is negative", ErrInvalidOptions, o.Cooldown)
	}
	f := &Store{store: s, mode: o.Mode, local: o.Local, clock: o.Clock, log: o.Logger}
	switch {
	case o.Timeout == 0:
		f.timeout = defaultTimeout
	case o.Timeout > 0:
		f.timeout = o.Timeout
	}
	f.threshold = int64(cmp.Or(o.Threshold, defaultThreshold))
	f.failFor = max(cmp.Or(o.FailFor, defaultFailFor), 0)
	f.cooldown = cmp.Or(o.Cooldown, defaultCooldown)
	f.maxCooldown = max(o.MaxCooldown, f.cooldown)
	if ps, ok := s.(store.Partitioned); ok && ps.Partitions() > 1 {
		f.parts, f.breakers = ps, make([]atomic.Pointer[breaker], ps.Partitions())
	}
	if f.local == nil && f.mode == FailLocal {
		f.local = memstore.New(0)
	}
	if _, real := f.clock.(clock.Real); real {
		f.clock = nil
	}
	return f, nil
}

// Unwrap returns the wrapped store.
func (f *Store) Unwrap() store.Store { return f.store }

// Mode returns the store's failure mode.
func (f *Store) Mode() Mode { return f.mode }

// policy returns the policy of t, a table of f (store.Check's question).
func (f *Store) policy(t store.Table) (*algo.Policy, bool) {
	ft, ok := t.(*table)
	if !ok || ft.f != f {
		return nil, false
	}
	return &ft.p, true
}

// Table implements Store: it returns a table wrapping the store's table
// named name with policy p, and the store's error if it has one (which is
// not a failure: stores make tables without calling out).
func (f *Store) Table(name string, p algo.Policy) (store.Table, error) {
	t, err := f.store.Table(name, p)
	if err != nil {
		return nil, err
	}
	return &table{f: f, inner: t, name: name, p: p}, nil
}

// table is a table of a Store: the store's table, and the
// name and policy of the local one.
type table struct {
	f     *Store
	inner store.Table
	name  string
	p     algo.Policy

	once     sync.Once
	local    store.Table
	localErr error
}

// localTable returns the local store's table of t's name and policy,
// making it the first time.
func (t *table) localTable() (store.Table, error) {
	t.once.Do(func() { t.local, t.localErr = t.f.local.Table(t.name, t.p) })
	return t.local, t.localErr
}
