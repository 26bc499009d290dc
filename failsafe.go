package floodgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/store"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
)

// FailMode says what a FailsafeStore does while its store is failing.
type FailMode uint8

// The failure modes. The zero FailMode is FailClosed, which never admits
// more than the store would.
const (
	// FailClosed denies every request, with an error wrapping
	// ErrStoreUnavailable and the store's error.
	FailClosed FailMode = iota
	// FailOpen admits every request, counted in FailsafeStats.Open.
	FailOpen
	// FailLocal decides on a memory store (memstore.Store) of this process, on the table
	// with the same name and policy.
	FailLocal
)

var failModeNames = [...]string{FailClosed: "closed", FailOpen: "open", FailLocal: "local"}

// String returns "closed", "open" or "local".
func (m FailMode) String() string {
	if int(m) < len(failModeNames) {
		return failModeNames[m]
	}
	return fmt.Sprintf("FailMode(%d)", uint8(m))
}

// FailsafeOptions configures Failsafe. The zero value fails closed with the
// default durations.
type FailsafeOptions struct {
	// Mode is what to do while the store is failing; the zero value is
	// FailClosed.
	Mode FailMode
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
	// to DefaultMaxKeys keys per table. Other modes ignore it.
	Local *memstore.Store
	// Clock measures cooldowns; nil means the system clock. Tests pass a
	// clock.Fake.
	Clock clock.Clock
	// Logger, if not nil, logs each transition once: a Warn when the
	// store goes down, an Info when it is back. Requests are never logged.
	Logger *slog.Logger
}

// The defaults of FailsafeOptions.
const (
	failsafeTimeout     = 100 * time.Millisecond
	failsafeCooldown    = time.Second
	failsafeMaxCooldown = 30 * time.Second
)

// FailsafeStore is a Store that wraps another, typically one shared over the
// network (Redis, a file), and keeps deciding while that store is failing,
// by the FailMode its user chose, instead of returning the store's errors;
// it notices by itself when the store works again. Make one with Failsafe.
//
// The store is up or down. While it is up, every call goes to it, bounded by
// the Timeout; the wrapper adds one atomic load, and the Timeout's context
// unless the caller's deadline is sooner. The first call that fails (an
// error that is not bad input, or the Timeout expiring) marks the store
// down. While it is down, calls do not reach it: each is decided at once by
// the mode. After a cooldown one call, the probe, goes to the store again,
// while every other call still uses the mode; if the probe succeeds the
// store is up, and if it fails the cooldown doubles, up to MaxCooldown. The
// wrapper starts no goroutine and queues nothing.
//
// While the store is down, the modes decide as follows:
//   - FailClosed denies every request (peeks too), with RetryAfter the
//     time until the next probe (or, while a probe is under way, the
//     Timeout, within which its outcome is known) and an error wrapping
//     ErrStoreUnavailable and the store's last error. Only the store
//     admits, so nothing is admitted beyond the limit.
//   - FailOpen admits every request, with Remaining 0 (unknown), and
//     counts it: there is no limit while the store is down.
//   - FailLocal decides on a memory store of this process, on the table of
//     the same name and policy, made the first time it is needed. Each
//     process decides alone, so N processes may together admit N times the
//     limit while the store is down. Nor does a key's state cross a
//     failover: the local store counts only what it admitted itself (a key
//     it has not seen starts afresh, with a full bucket), and after the
//     recovery the store decides from its own state, which does not count
//     what was admitted locally. So at each switch, either way, a process
//     may admit up to one burst (the policy's Burst) per key beyond the
//     limit. Apart from that, it never admits more than the limit.
//
// Bad input (a negative cost, a time out of range, a cost above the burst,
// a key the store refuses, a table of another store) is not a failure: the
// store's answer is passed on, and while the store is down the wrapper
// gives the same answer in every mode (a cost above the burst is denied
// with RetryAfter Never and an error wrapping ErrCostExceedsBurst), except
// for keys, which only the store checks. Nor is a call whose caller's
// context is done a failure: it returns the context's error. With no Timeout, a call to a store that
// hangs holds its caller until the store answers, and a hanging probe
// keeps the store down until it returns.
//
// A batch (Apply) is decided the same way, all or nothing. While the store
// is down, FailClosed fails the whole batch, changing nothing; FailOpen
// admits each OpDecide and OpSchedule (an OpSchedule at its Now), and drops
// refunds and resets; FailLocal runs the batch on the local store. A refund
// goes to the store that admitted its units, if that store is the one
// deciding at the time, and is dropped otherwise: units admitted by the
// store and given back while it is down, or admitted locally and given back
// after the recovery, stay spent, which is only stricter (the stamps of the
// local store's admissions carry a mark saying so). A reset while the store
// is down resets the key on the local store in FailLocal mode, and nowhere
// in the others.
//
// A FailsafeStore is safe for concurrent use. Stats counts what it did.
type FailsafeStore struct {
	store       store.Store
	mode        FailMode
	timeout     time.Duration // 0: none
	cooldown    time.Duration
	maxCooldown time.Duration
	local       *memstore.Store
	clock       clock.Clock // nil: the real clock
	log         *slog.Logger
	err         error // a bad configuration, returned by every call

	// gen counts the transitions: even while the store is up, odd while it
	// is down. A call that fails changes the state only if gen has not
	// changed since it began, so a slow call from before a recovery cannot
	// undo it.
	gen     atomic.Uint64
	probing atomic.Bool              // a probe is under way
	retryAt atomic.Int64             // while down: when the next probe may go, ns on clock
	lastErr atomic.Pointer[error]    // FailClosed's error, wrapping the last failure
	stats   [nFailsafeCounts]counter // indexed by the count* constants

	mu      sync.Mutex    // serializes transitions
	backoff time.Duration // the current cooldown
	downAt  int64         // when the store went down, ns on clock
}

// counter is an atomic counter padded to 64 bytes, so that no two counters
// share a cache line, nor gen and those counted on every call while the
// store is down.
type counter struct {
	atomic.Uint64
	_ [56]byte
}

const (
	countFailures = iota
	countOpen
	countClosed
	countLocal
	countRecoveries
	nFailsafeCounts
)

// Failsafe returns a FailsafeStore wrapping s, configured by o (see
// FailsafeOptions for the defaults).
//
// Failsafe cannot fail: for a nil s or an unknown Mode every method of the
// store returns the error.
func Failsafe(s store.Store, o FailsafeOptions) *FailsafeStore {
	f := &FailsafeStore{store: s, mode: o.Mode, local: o.Local, clock: o.Clock, log: o.Logger}
	switch {
	case s == nil:
		f.err = errors.New("floodgate: Failsafe of a nil Store")
	case o.Mode > FailLocal:
		f.err = fmt.Errorf("floodgate: Failsafe: unknown %v", o.Mode)
	}
	switch {
	case o.Timeout == 0:
		f.timeout = failsafeTimeout
	case o.Timeout > 0:
		f.timeout = o.Timeout
	}
	f.cooldown = o.Cooldown
	if f.cooldown <= 0 {
		f.cooldown = failsafeCooldown
	}
	f.maxCooldown = o.MaxCooldown
	if f.maxCooldown <= 0 {
		f.maxCooldown = max(failsafeMaxCooldown, f.cooldown)
	}
	f.maxCooldown = max(f.maxCooldown, f.cooldown)
	if f.local == nil && f.mode == FailLocal {
		f.local = memstore.New(0)
	}
	if _, real := f.clock.(clock.Real); real {
		f.clock = nil
	}
	return f
}

// Unwrap returns the wrapped store.
func (f *FailsafeStore) Unwrap() store.Store { return f.store }

// Mode returns the store's failure mode.
func (f *FailsafeStore) Mode() FailMode { return f.mode }

// FailsafeStats counts what a FailsafeStore did since it was made. A call
// is one Table.Decide or one Store.Apply, however many ops it holds.
type FailsafeStats struct {
	// Down reports whether the store is failing now.
	Down bool
	// Failures counts the calls to the store that failed, probes
	// included; bad input and callers' done contexts are not failures.
	Failures uint64
	// Open counts the calls admitted by FailOpen because the store was
	// failing.
	Open uint64
	// Closed counts the calls denied by FailClosed because the store was
	// failing.
	Closed uint64
	// Local counts the calls decided on the local store by FailLocal,
	// admitted or not.
	Local uint64
	// Recoveries counts the times the store came back up.
	Recoveries uint64
}

// Stats returns the store's counts.
func (f *FailsafeStore) Stats() FailsafeStats {
	return FailsafeStats{
		Down:       f.gen.Load()&1 == 1,
		Failures:   f.stats[countFailures].Load(),
		Open:       f.stats[countOpen].Load(),
		Closed:     f.stats[countClosed].Load(),
		Local:      f.stats[countLocal].Load(),
		Recoveries: f.stats[countRecoveries].Load(),
	}
}

// policy returns the policy of t, a table of f (store.Check's question).
func (f *FailsafeStore) policy(t store.Table) (*algo.Policy, bool) {
	ft, ok := t.(*failsafeTable)
	if !ok || ft.f != f {
		return nil, false
	}
	return &ft.p, true
}

// Table implements Store: it returns a table wrapping the store's table
// named name with policy p, and the store's error if it has one (which is
// not a failure: stores make tables without calling out).
func (f *FailsafeStore) Table(name string, p Policy) (store.Table, error) {
	if f.err != nil {
		return nil, f.err
	}
	t, err := f.store.Table(name, p)
	if err != nil {
		return nil, err
	}
	return &failsafeTable{f: f, inner: t, name: name, p: p}, nil
}

// failsafeTable is a table of a FailsafeStore: the store's table, and the
// name and policy of the local one.
type failsafeTable struct {
	f     *FailsafeStore
	inner store.Table
	name  string
	p     Policy

	once     sync.Once
	local    store.Table
	localErr error
}

// localTable returns the local store's table of t's name and policy,
// making it the first time.
func (t *failsafeTable) localTable() (store.Table, error) {
	t.once.Do(func() { t.local, t.localErr = t.f.local.Table(t.name, t.p) })
	return t.local, t.localErr
}

// Decide implements Table.
func (t *failsafeTable) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	f := t.f
	g := f.gen.Load()
	if g&1 == 0 { // up
		d, err := t.decideInner(ctx, key, now, n)
		if err == nil {
			return d, nil
		}
		if !f.isFailure(ctx, err) {
			return d, callerErr(ctx, err)
		}
		f.fail(g, err, false)
		return t.fallback(ctx, key, now, n)
	}
	if err := t.p.CheckEvent(now, n); err != nil {
		return algo.Decision{}, err
	}
	if n <= t.p.Burst() && f.acquireProbe() {
		g := f.gen.Load()
		d, err := t.decideInner(ctx, key, now, n)
		switch {
		case err == nil:
			f.up(g)
			return d, nil
		case !f.isFailure(ctx, err):
			f.probing.Store(false)
			return d, callerErr(ctx, err)
		}
		f.fail(g, err, true)
	}
	return t.fallback(ctx, key, now, n)
}

// decideInner decides on the store, within the Timeout.
func (t *failsafeTable) decideInner(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	c, cancel := t.f.bound(ctx)
	d, err := t.inner.Decide(c, key, now, n)
	if cancel != nil {
		cancel()
	}
	return d, err
}

// fallback decides by the mode, the store having failed; the input has
// been checked but for a cost above the burst.
func (t *failsafeTable) fallback(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	f := t.f
	if f.mode == FailLocal {
		lt, err := t.localTable()
		if err != nil {
			return algo.Decision{}, err
		}
		f.stats[countLocal].Add(1)
		return lt.Decide(ctx, key, now, n)
	}
	if n > t.p.Burst() {
		return algo.Decision{RetryAfter: Never}, costExceedsBurst(n, t.p)
	}
	if f.mode == FailOpen {
		f.stats[countOpen].Add(1)
		return algo.Decision{Allowed: true}, nil
	}
	f.stats[countClosed].Add(1)
	return algo.Decision{RetryAfter: f.retryAfter()}, f.unavailable()
}

// Apply implements Store.
func (f *FailsafeStore) Apply(ctx context.Context, ops []store.Op) error {
	return f.apply(ctx, ops, false)
}

// ApplyEach implements store.Store: the ops, each as if alone, go to the
// store's ApplyEach, or are decided by the mode while it is down, as
// Apply's are.
func (f *FailsafeStore) ApplyEach(ctx context.Context, ops []store.Op) error {
	return f.apply(ctx, ops, true)
}

// apply carries out ops all or nothing, or each as if alone.
func (f *FailsafeStore) apply(ctx context.Context, ops []store.Op, each bool) error {
	if f.err != nil {
		return f.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Bad input is answered the same, up or down.
	if err := store.Check(ops, f.policy); err != nil {
		return fmt.Errorf("floodgate: %w", err)
	}
	g := f.gen.Load()
	if g&1 == 0 { // up
		err := f.applyInner(ctx, ops, each)
		if err == nil {
			return nil
		}
		if !f.isFailure(ctx, err) {
			return callerErr(ctx, err)
		}
		f.fail(g, err, false)
		return f.applyFallback(ctx, ops, each)
	}
	if probeable(ops) && f.acquireProbe() {
		g := f.gen.Load()
		err := f.applyInner(ctx, ops, each)
		switch {
		case err == nil:
			f.up(g)
			return nil
		case !f.isFailure(ctx, err):
			f.probing.Store(false)
			return callerErr(ctx, err)
		}
		f.fail(g, err, true)
	}
	return f.applyFallback(ctx, ops, each)
}

// probeable reports whether ops may probe the store: some op would reach
// it, and none is denied before it would be (a store may answer those
// without calling out, which would prove nothing).
func probeable(ops []store.Op) bool {
	reaches := false
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case store.OpDecide, store.OpSchedule:
			if op.N > op.Table.(*failsafeTable).p.Burst() {
				return false
			}
		case store.OpRefund:
			if isLocalStamp(op.Stamp) {
				continue
			}
		}
		reaches = true
	}
	return reaches
}

// applyInner runs ops on the store, within the Timeout, leaving out the
// refunds of units the local store admitted.
func (f *FailsafeStore) applyInner(ctx context.Context, ops []store.Op, each bool) error {
	inner := make([]store.Op, 0, len(ops))
	idx := make([]int, 0, len(ops))
	for i := range ops {
		op := ops[i]
		if op.Kind == store.OpRefund && isLocalStamp(op.Stamp) {
			continue
		}
		op.Table = op.Table.(*failsafeTable).inner
		inner = append(inner, op)
		idx = append(idx, i)
	}
	if len(inner) == 0 {
		return nil
	}
	c, cancel := f.bound(ctx)
	if cancel != nil {
		defer cancel()
	}
	if err := applyOn(f.store, each)(c, inner); err != nil {
		return err
	}
	for j, i := range idx {
		ops[i].Result = inner[j].Result
	}
	return nil
}

// applyOn returns s's Apply, or with each ApplyEach on s.
func applyOn(s store.Store, each bool) func(context.Context, []store.Op) error {
	if each {
		return s.ApplyEach
	}
	return s.Apply
}

// applyFallback runs ops by the mode, the store having failed; the ops have
// been checked but for costs above the burst.
func (f *FailsafeStore) applyFallback(ctx context.Context, ops []store.Op, each bool) error {
	if f.mode == FailLocal {
		return f.applyLocal(ctx, ops, each)
	}
	var retry time.Duration
	if f.mode == FailClosed {
		retry = f.retryAfter()
	}
	decided, denied := false, false
	for i := range ops {
		op := &ops[i]
		op.Result = store.Result{}
		if op.Kind != store.OpDecide && op.Kind != store.OpSchedule {
			continue // a refund or reset: dropped
		}
		decided = true
		switch p := op.Table.(*failsafeTable).p; {
		case op.N > p.Burst():
			op.Result.Decision.RetryAfter, op.Result.Err = Never, costExceedsBurst(op.N, p)
			denied = true
		case f.mode == FailOpen:
			op.Result.Decision.Allowed, op.Result.At = true, op.Now
		default:
			op.Result.Decision.RetryAfter = retry
		}
	}
	if f.mode == FailClosed {
		f.stats[countClosed].Add(1)
		return f.unavailable()
	}
	if decided && !denied {
		f.stats[countOpen].Add(1)
	}
	return nil
}

// applyLocal runs ops on the local store, leaving out the refunds of units
// it did not admit, and marks the stamps of what it admits.
func (f *FailsafeStore) applyLocal(ctx context.Context, ops []store.Op, each bool) error {
	local := make([]store.Op, 0, len(ops))
	idx := make([]int, 0, len(ops))
	for i := range ops {
		op := ops[i]
		if op.Kind == store.OpRefund {
			if !isLocalStamp(op.Stamp) {
				continue
			}
			op.Stamp = localStamp(op.Stamp)
		}
		lt, err := op.Table.(*failsafeTable).localTable()
		if err != nil {
			return err
		}
		op.Table = lt
		local = append(local, op)
		idx = append(idx, i)
	}
	if len(local) == 0 {
		return nil
	}
	f.stats[countLocal].Add(1)
	if err := applyOn(f.local, each)(ctx, local); err != nil {
		return err
	}
	for j, i := range idx {
		op, lop := &ops[i], &local[j]
		op.Result = lop.Result
		if (op.Kind == store.OpDecide || op.Kind == store.OpSchedule) && op.Result.Decision.Allowed && op.N > 0 {
			op.Result.Stamp = localStamp(op.Result.Stamp)
		}
	}
	return nil
}

// The stamps of the local store's admissions are marked by complementing
// their TAT, which every store leaves non-negative (algo.Policy.Refund
// ignores a stamp with a negative TAT), so that a refund goes back to the
// store that admitted the units and to no other. localStamp marks a stamp
// and unmarks a marked one.
func localStamp(s algo.Stamp) algo.Stamp { s.TAT = ^s.TAT; return s }

func isLocalStamp(s algo.Stamp) bool { return s.TAT < 0 }

// bound returns ctx bounded by the Timeout, and its cancel function; ctx
// itself and a nil function when there is no Timeout or ctx's deadline is
// sooner.
func (f *FailsafeStore) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if f.timeout == 0 {
		return ctx, nil
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= f.timeout {
		return ctx, nil
	}
	return context.WithTimeout(ctx, f.timeout)
}

// isFailure reports whether err, returned by the store for a call on ctx,
// is a failure of the store: not bad input, and not the caller's context
// being done (the Timeout's is a failure).
func (f *FailsafeStore) isFailure(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	for _, bad := range [...]error{ErrInvalidCost, ErrInvalidTime, ErrInvalidPolicy, store.ErrInvalidKey, store.ErrForeignTable, store.ErrInvalidOp, ErrCostExceedsBurst} {
		if errors.Is(err, bad) {
			return false
		}
	}
	return true
}

// callerErr returns err, the store's error on a call on ctx that was not a
// failure, making sure that it wraps ctx's error when ctx is done.
func callerErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (the store said: %w)", cerr, err)
	}
	return err
}

// now returns the time on f's clock, in ns.
func (f *FailsafeStore) now() int64 {
	if f.clock == nil {
		return clock.UnixNano()
	}
	return f.clock.Now().UnixNano()
}

// acquireProbe reports whether the caller may probe the store: the store
// is down, its cooldown has passed and no other probe is under way. The
// caller must then end with up, fail(probe true), or clear probing.
func (f *FailsafeStore) acquireProbe() bool {
	now := f.now()
	if now < f.retryAt.Load() || !f.probing.CompareAndSwap(false, true) {
		return false
	}
	// The probe that held the flag may have failed since retryAt was
	// loaded, moving it on: look again now that no probe can change it.
	if now < f.retryAt.Load() {
		f.probing.Store(false)
		return false
	}
	return true
}

// fail records a failed call to the store that began in generation g, a
// probe or not: the store goes down if it was up in g and still is, and a
// failed probe doubles the cooldown.
func (f *FailsafeStore) fail(g uint64, err error, probe bool) {
	f.stats[countFailures].Add(1)
	if f.mode == FailClosed {
		e := fmt.Errorf("floodgate: %w: %w", ErrStoreUnavailable, err)
		f.lastErr.Store(&e)
	}
	now := f.now()
	f.mu.Lock()
	wentDown := false
	if f.gen.Load() == g {
		if g&1 == 0 {
			f.backoff, f.downAt, wentDown = f.cooldown, now, true
		} else if f.backoff > f.maxCooldown/2 {
			f.backoff = f.maxCooldown
		} else {
			f.backoff *= 2
		}
		// retryAt before gen: whoever sees the store down sees when to probe.
		f.retryAt.Store(addSat(now, f.backoff))
		if wentDown {
			f.gen.Store(g + 1)
		}
	}
	backoff := f.backoff
	if probe {
		f.probing.Store(false)
	}
	f.mu.Unlock()
	if wentDown && f.log != nil {
		f.log.Warn("floodgate: store failing", "mode", f.mode.String(), "cooldown", backoff, "err", err)
	}
}

// up records a successful probe that began in generation g: the store is
// up again, if it was down in g and still is.
func (f *FailsafeStore) up(g uint64) {
	now := f.now()
	f.mu.Lock()
	recovered := g&1 == 1 && f.gen.Load() == g
	if recovered {
		f.gen.Store(g + 1)
		f.stats[countRecoveries].Add(1)
	}
	downFor := time.Duration(now - f.downAt)
	f.probing.Store(false)
	f.mu.Unlock()
	if recovered && f.log != nil {
		f.log.Info("floodgate: store recovered", "mode", f.mode.String(), "down", downFor)
	}
}

// retryAfter is FailClosed's RetryAfter: the time until the next probe,
// or while one is under way, the time within which it ends.
func (f *FailsafeStore) retryAfter() time.Duration {
	if d := time.Duration(f.retryAt.Load() - f.now()); d > 0 {
		return d
	}
	if f.timeout > 0 {
		return f.timeout
	}
	return f.cooldown
}

// unavailable returns FailClosed's error.
func (f *FailsafeStore) unavailable() error {
	if e := f.lastErr.Load(); e != nil {
		return *e
	}
	return fmt.Errorf("floodgate: %w", ErrStoreUnavailable)
}

func costExceedsBurst(n int64, p Policy) error {
	return fmt.Errorf("%w: cost %d, burst %d", ErrCostExceedsBurst, n, p.Burst())
}

// addSat returns t+d, or the largest time when that overflows.
func addSat(t int64, d time.Duration) int64 {
	if t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return t + int64(d)
}
