package failsafe

import (
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
	// takes longer is cancelled and counts as a failure. 0 means 100ms; a
	// negative Timeout means none (the store bounds its calls itself).
	// Keep it shorter than callers' deadlines: a call cut short by the
	// caller's own context says nothing about the store and is not a
	// failure.
	Timeout time.Duration
	// Cooldown is how long, after a failure, calls do not reach the store
	// before one of them probes it. Each failed probe doubles it, up to
	// MaxCooldown; a recovery sets it back. 0 means 1s.
	Cooldown time.Duration
	// MaxCooldown bounds the doubled cooldown. 0 means 30s (or Cooldown,
	// if longer); a MaxCooldown below Cooldown is raised to it.
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
	defaultTimeout     = 100 * time.Millisecond
	defaultCooldown    = time.Second
	defaultMaxCooldown = 30 * time.Second
)

// Store is a store.Store that wraps another and keeps deciding, by its
// Mode, while that store is failing; the package documentation says how.
// Make one with New. A Store is safe for concurrent use; Stats counts what
// it did.
type Store struct {
	store       store.Store
	mode        Mode
	timeout     time.Duration // 0: none
	cooldown    time.Duration
	maxCooldown time.Duration
	local       *memstore.Store
	clock       clock.Clock // nil: the real clock
	log         *slog.Logger

	// gen counts the transitions: even while the store is up, odd while it
	// is down. A call that fails changes the state only if gen has not
	// changed since it began, so a slow call from before a recovery cannot
	// undo it.
	gen     atomic.Uint64
	probing atomic.Bool           // a probe is under way
	retryAt atomic.Int64          // while down: when the next probe may go, ns on clock
	lastErr atomic.Pointer[error] // FailClosed's error, wrapping the last failure
	stats   [nCounts]counter      // indexed by the count* constants

	mu      sync.Mutex    // serializes transitions
	backoff time.Duration // the current cooldown
	downAt  int64         // when the store went down, ns on clock
}

// New returns a Store wrapping s, configured by o (see Options for the
// defaults). It fails, with an error wrapping ErrInvalidOptions, for a nil
// s or an unknown Mode.
func New(s store.Store, o Options) (*Store, error) {
	switch {
	case s == nil:
		return nil, fmt.Errorf("failsafe: %w: a nil store", ErrInvalidOptions)
	case o.Mode > FailLocal:
		return nil, fmt.Errorf("failsafe: %w: unknown %v", ErrInvalidOptions, o.Mode)
	}
	f := &Store{store: s, mode: o.Mode, local: o.Local, clock: o.Clock, log: o.Logger}
	switch {
	case o.Timeout == 0:
		f.timeout = defaultTimeout
	case o.Timeout > 0:
		f.timeout = o.Timeout
	}
	f.cooldown = o.Cooldown
	if f.cooldown <= 0 {
		f.cooldown = defaultCooldown
	}
	f.maxCooldown = o.MaxCooldown
	if f.maxCooldown <= 0 {
		f.maxCooldown = max(defaultMaxCooldown, f.cooldown)
	}
	f.maxCooldown = max(f.maxCooldown, f.cooldown)
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
