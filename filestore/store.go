package filestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/batch"
	"github.com/floodgate/floodgate/internal/tablename"
	"github.com/floodgate/floodgate/store"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Store keeps floodgate's state in one file, shared by every process that
// opens it. Make one with Open (the zero Store is not usable) and release
// it with Close. It is safe for concurrent use, and any number of Stores,
// in any number of processes, may share one file; the package
// documentation says how they take turns.
type Store struct {
	path    string
	cfg     config
	batcher *batch.Batcher[[]store.Op]

	// mu is held by the transaction in progress, and by Close.
	mu     sync.Mutex
	db     *bolt.DB // WithHold: open from Open to Close
	closed bool
	// policies maps the name of each table bucket that a sweep has met to
	// its policy; nil for a bucket that is not a table's.
	policies map[string]*algo.Policy

	tmu    sync.Mutex
	tables map[tableKey]*table
}

type tableKey struct {
	name string
	p    algo.Policy
}

// fileMode is the permission of a new file, before the umask, as with
// os.Create: every user that may share the limits must be able to write
// the file.
const fileMode = 0o666

// Open returns a Store keeping state in the file at path. It creates the
// file when it is missing (not its directory, nor anything else), and
// fails when the file is not a bbolt database (ErrCorrupt), or stays
// locked by others past the lock timeout (ErrLocked). Unless WithHold is
// given, it leaves the file closed until the first call; close the Store
// with Close.
func Open(path string, opts ...Option) (*Store, error) {
	cfg := defaults()
	for _, o := range opts {
		if err := o.apply(&cfg); err != nil {
			return nil, fmt.Errorf("filestore: %w", err)
		}
	}
	s := &Store{path: path, cfg: cfg, tables: make(map[tableKey]*table), policies: make(map[string]*algo.Policy)}
	s.batcher = newBatcher(s, defaultMaxBatch)
	db, err := s.open(&waiter{store: s, start: time.Now()})
	if err != nil {
		return nil, err
	}
	if cfg.hold {
		s.db = db
		return s, nil
	}
	if err := db.Close(); err != nil {
		return nil, fmt.Errorf("filestore: closing %s: %w", path, err)
	}
	return s, nil
}

// open opens the file, waiting while others hold it as w says.
func (s *Store) open(w *waiter) (*bolt.DB, error) {
	opts := *bolt.DefaultOptions
	// Where lockingOpen takes the lock, bbolt's own attempt succeeds at
	// once; elsewhere bbolt waits for it (0 would mean for ever).
	opts.OpenFile = lockingOpen(w)
	opts.Timeout = max(s.cfg.lockTimeout, 1)
	db, err := bolt.Open(s.path, fileMode, &opts)
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, errAbandoned):
		return nil, err
	case errors.Is(err, berrors.ErrTimeout):
		return nil, s.locked()
	case errors.Is(err, ErrLocked):
		return nil, err
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		return nil, fmt.Errorf("filestore: opening %s: %w: %w", s.path, ErrCorrupt, err)
	}
	return nil, fmt.Errorf("filestore: opening %s: %w", s.path, err)
}

func (s *Store) locked() error {
	return fmt.Errorf("filestore: %s: %w by another process or Store for more than %v", s.path, ErrLocked, s.cfg.lockTimeout)
}

// errAbandoned ends the wait for the file when no caller waits any more.
var errAbandoned = errors.New("every caller gave up")

// Polling bounds for a file that others hold: the first retry comes soon,
// since a transaction takes about a millisecond, and later ones no more
// than maxPoll apart.
const (
	minPoll = 100 * time.Microsecond
	maxPoll = 4 * time.Millisecond
)

// waiter paces the attempts to lock the file for one transaction: it gives
// up after the lock timeout, or when every caller of the transaction has
// left (their contexts ended: the calls, not yet taken, are withdrawn).
type waiter struct {
	store *Store
	start time.Time
	delay time.Duration
	calls []*call // none for Open
}

// wait returns when the next attempt is due, or an error to give up with.
func (w *waiter) wait() error {
	var done <-chan struct{}
	if w.calls != nil {
		n := 0
		for _, c := range w.calls {
			if c.Waiting() {
				n++
				done = c.Context().Done()
			}
		}
		if n == 0 {
			return errAbandoned
		}
		if n > 1 {
			done = nil // each caller watches its own context
		}
	}
	left := w.store.cfg.lockTimeout - time.Since(w.start)
	if left <= 0 {
		return w.store.locked()
	}
	w.delay = min(max(2*w.delay, minPoll), maxPoll, left)
	t := time.NewTimer(w.delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
	}
	return nil
}

// Close releases the store: it waits for the transaction in progress,
// closes the file when the store holds it (WithHold), and makes later
// calls fail with ErrClosed. Closing twice is not an error.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.db == nil {
		return nil
	}
	db := s.db
	s.db = nil
	if err := db.Close(); err != nil {
		return fmt.Errorf("filestore: closing %s: %w", s.path, err)
	}
	return nil
}

// Path returns the file's path, as given to Open.
func (s *Store) Path() string { return s.path }

// Table implements store.Store. The keys of the limiter named name
// live in the bbolt bucket named name, with '%', ':', '{', '}' and '@'
// escaped as in URLs, then "@" and the policy (escaped alike) when name
// is not the policy's own string (the default name). A name longer than
// a bucket name may be (bolt.MaxKeySize bytes, escaped) is refused with
// an error wrapping store.ErrInvalidKey.
func (s *Store) Table(name string, p algo.Policy) (store.Table, error) {
	if p.IsZero() {
		return nil, fmt.Errorf("filestore: %w: the zero Policy", algo.ErrInvalidPolicy)
	}
	s.tmu.Lock()
	defer s.tmu.Unlock()
	k := tableKey{name, p}
	if t := s.tables[k]; t != nil {
		return t, nil
	}
	bucket := tablename.Of(name, p)
	if len(bucket) > bolt.MaxKeySize {
		return nil, fmt.Errorf("filestore: %w: a limiter name of %d bytes (%d escaped, with the policy), more than bbolt's %d",
			store.ErrInvalidKey, len(name), len(bucket), bolt.MaxKeySize)
	}
	t := &table{store: s, policy: p, bucket: []byte(bucket)}
	s.tables[k] = t
	return t, nil
}

// metaBucket holds the store's own records (the sweep's position). No
// table's bucket has this name: a table's escapes '%' as "%25".
var metaBucket = []byte("%floodgate")

// storedKey returns the bbolt key of a limiter's key: the key itself,
// except that bbolt refuses the empty key, so the empty key and keys that
// begin with a NUL byte are stored after a NUL byte.
func storedKey(key string) []byte {
	if key == "" || key[0] == 0 {
		return append([]byte{0}, key...)
	}
	return []byte(key)
}

func storedLen(key string) int {
	if key == "" || key[0] == 0 {
		return len(key) + 1
	}
	return len(key)
}

// table is one limiter's keys.
type table struct {
	store  *Store
	policy algo.Policy
	bucket []byte
}

// Decide implements store.Table: one op, in one transaction with
// whatever other calls of this Store are waiting for the file.
func (t *table) Decide(ctx context.Context, key string, now, n int64) (algo.Decision, error) {
	if err := ctx.Err(); err != nil {
		return algo.Decision{}, err
	}
	c := &single{}
	c.ops[0] = store.Op{Kind: store.OpDecide, Table: t, Key: key, Now: now, N: n}
	if err := t.store.check(c.ops[:]); err != nil {
		return algo.Decision{}, err
	}
	c.Work = c.ops[:]
	if err := t.store.batcher.Do(ctx, &c.call); err != nil {
		return algo.Decision{}, err
	}
	if c.Err != nil {
		return algo.Decision{}, c.Err
	}
	return c.ops[0].Result.Decision, c.ops[0].Result.Err
}

// single is a call of one op, made with one allocation: the op is the
// call's own.
type single struct {
	call
	ops [1]store.Op
}

// check checks ops before the file is opened (store.Check), and their
// keys, whose length bbolt bounds.
func (s *Store) check(ops []store.Op) error {
	if err := store.Check(ops, s.policy); err != nil {
		return fmt.Errorf("filestore: %w", err)
	}
	for i := range ops {
		if k := ops[i].Key; storedLen(k) > bolt.MaxKeySize {
			return fmt.Errorf("filestore: op %d: %w: a key of %d bytes, more than bbolt's %d",
				i, store.ErrInvalidKey, len(k), bolt.MaxKeySize-(storedLen(k)-len(k)))
		}
	}
	return nil
}

// policy returns the policy of t, a table of s (store.Check's question).
func (s *Store) policy(t store.Table) (*algo.Policy, bool) {
	ft, ok := t.(*table)
	if !ok || ft.store != s {
		return nil, false
	}
	return &ft.policy, true
}

// Apply implements store.Store: the ops are carried out in one bbolt
// transaction, committed (and synced to disk) only when every OpDecide
// and OpSchedule is admitted and something changed. Calls of this Store
// that wait for the file at the same time share one transaction, each
// carried out as if alone, in the order they came.
func (s *Store) Apply(ctx context.Context, ops []store.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.check(ops); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	c := &call{Work: make([]store.Op, len(ops))}
	copy(c.Work, ops)
	return s.do(ctx, c, ops)
}

// ApplyEach implements store.Store: each op is a call of its own, carried
// out as if alone, and the calls go to the file together: in one
// transaction when it is free.
func (s *Store) ApplyEach(ctx context.Context, ops []store.Op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.check(ops); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	return s.doEach(ctx, ops)
}

// run carries out calls in one transaction: it takes the calls whose
// callers still wait once it holds the file, and sets each one's error.
// Calls whose callers all leave while it waits for the file are left to
// them, with nothing done.
func (s *Store) run(calls []*call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		fail(batch.Take(calls), fmt.Errorf("filestore: %s: %w", s.path, ErrClosed))
		return
	}
	db := s.db
	if db == nil {
		var err error
		if db, err = s.open(&waiter{store: s, start: time.Now(), calls: calls}); err != nil {
			if !errors.Is(err, errAbandoned) {
				fail(batch.Take(calls), err)
			}
			return
		}
		// After a commit the decisions stand, whatever Close says: the
		// kernel drops the lock with the descriptor anyway.
		defer db.Close()
	}
	if calls = batch.Take(calls); len(calls) == 0 {
		return
	}
	if err := s.transact(db, calls); err != nil {
		fail(calls, err)
	}
}

// fail sets err as the error of calls.
func fail(calls []*call, err error) {
	for _, c := range calls {
		c.Err = err
	}
}

// transact carries out calls in one read-write transaction of db. It
// returns an error, with nothing changed, when the transaction failed as a
// whole; a call that failed alone has its own error.
func (s *Store) transact(db *bolt.DB, calls []*call) error {
	tx, err := db.Begin(true)
	if err != nil {
		return fmt.Errorf("filestore: %s: beginning a transaction: %w", s.path, err)
	}
	x := txn{store: s, tx: tx, slots: make(map[slotKey]*slot)}
	for _, c := range calls {
		c.Err = x.carry(c.Work)
	}
	dirty, err := x.write()
	if err == nil && dirty {
		err = x.sweep(sweepKeys)
	}
	if err != nil || !dirty {
		tx.Rollback()
		if err != nil {
			return fmt.Errorf("filestore: %s: %w", s.path, err)
		}
		return nil
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("filestore: %s: committing: %w", s.path, err)
	}
	return nil
}
