package filestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/batch"
	"github.com/floodgate/floodgate/internal/tablename"
	"github.com/floodgate/floodgate/store"
	bolt "go.etcd.io/bbolt"
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
	cache   *denyCache // nil without WithDenyCache
	// transactions counts the transactions begun, for the tests.
	transactions atomic.Uint64

	// mu is held by the transaction in progress, and by Close.
	mu     sync.Mutex
	held   *handle // WithHold: the file, open until Close or damage
	closed bool
	// damaged, when not nil, is the file as it was when opening it
	// panicked, and damagedErr the error: calls fail with it, without
	// opening the file, until the file changes (see handle.go).
	damaged    os.FileInfo
	damagedErr error
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
// file when no file is at path (not its directory, nor anything else), and
// fails when the file there is not a floodgate store (ErrNotStore: an
// empty file, another program's, another program's bbolt database), is
// damaged (ErrCorrupt), or stays locked by others past the lock timeout
// (ErrLocked). Unless WithHold is given, it leaves the file closed until
// the first call; close the Store with Close.
func Open(path string, opts ...Option) (*Store, error) {
	cfg := defaults()
	for _, o := range opts {
		if err := o.apply(&cfg); err != nil {
			return nil, fmt.Errorf("filestore: %w", err)
		}
	}
	s := &Store{path: path, cfg: cfg, tables: make(map[tableKey]*table), policies: make(map[string]*algo.Policy)}
	s.batcher = newBatcher(s, defaultMaxBatch)
	if cfg.denyCache > 0 {
		s.cache = newDenyCache(cfg.denyCache)
	}
	h, err := s.open(&waiter{store: s, start: time.Now()})
	if err != nil {
		return nil, err
	}
	if err := s.guard("reading", func() error { return h.db.View(isStore) }); err != nil {
		h.close()
		return nil, fmt.Errorf("filestore: %s: %w", path, err)
	}
	if cfg.hold {
		s.held = h
		return s, nil
	}
	if err := h.db.Close(); err != nil {
		return nil, fmt.Errorf("filestore: closing %s: %w", path, err)
	}
	return s, nil
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
	if s.cache != nil {
		s.cache.close()
	}
	if s.held == nil {
		return nil
	}
	h := s.held
	s.held = nil
	if err := h.db.Close(); err != nil {
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
	if t.store.cache != nil && t.store.cache.answer(t.store.path, &c.ops[0]) {
		return c.ops[0].Result.Decision, c.ops[0].Result.Err
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
	if len(ops) == 1 && s.cache != nil && s.cache.answer(s.path, &ops[0]) {
		return nil
	}
	c := &call{Work: make([]store.Op, len(ops))}
	copy(c.Work, ops)
	return s.do(ctx, c, ops)
}

// ApplyEach implements store.Store: each op is a call of its own, carried
// out as if alone, and the calls go to the file together: in one
// transaction when it is free. The file is one partition: a failure of
// it fails the whole call, never some ops apart (store.ErrPartialFailure).
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
	if s.cache == nil {
		return s.doEach(ctx, ops)
	}
	rest, index := s.cache.answerEach(s.path, ops)
	if len(rest) == 0 {
		return nil
	}
	err := s.doEach(ctx, rest)
	for j, i := range index {
		ops[i].Result = rest[j].Result
	}
	return err
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
	h := s.held
	if h == nil {
		var err error
		if h, err = s.open(&waiter{store: s, start: time.Now(), calls: calls}); err != nil {
			if !errors.Is(err, errAbandoned) {
				fail(batch.Take(calls), err)
				s.settle(nil, nil, err)
			}
			return
		}
	}
	health := intact
	if calls = batch.Take(calls); len(calls) > 0 {
		var err error
		if health, err = s.transact(h, calls); err != nil {
			fail(calls, err)
		}
	}
	s.release(h, health)
}

// fail sets err as the error of calls.
func fail(calls []*call, err error) {
	for _, c := range calls {
		c.Err = err
	}
}

// transact carries out calls in one read-write transaction of db. It
// returns an error, with nothing changed, when the transaction failed as a
// whole; a call that failed alone has its own error. A panic (bbolt's on a
// damaged page) is an error wrapping ErrCorrupt, the transaction rolled
// back; health says what became of db.
func (s *Store) transact(h *handle, calls []*call) (health, error) {
	s.transactions.Add(1)
	var tx *bolt.Tx
	var x *txn
	err := s.guard("reading", func() error {
		if h.file != nil && s.held != nil { // the file may have changed since Open
			if err := checkFreelist(h.file); err != nil {
				return err
			}
		}
		var err error
		if tx, err = h.db.Begin(true); err != nil {
			return fmt.Errorf("beginning a transaction: %w", err)
		}
		x, err = s.carry(tx, calls)
		return err
	})
	s.settle(h, x, err)
	if err == nil {
		return intact, nil
	}
	hl := intact
	if errors.Is(err, ErrCorrupt) {
		hl = damagedFile
	}
	if tx != nil && tx.DB() != nil { // not committed nor rolled back
		if s.guard("rolling back", tx.Rollback) != nil {
			hl = stuck
		}
	}
	return hl, fmt.Errorf("filestore: %s: %w", s.path, err)
}

// carry carries out calls in tx, a read-write transaction, and commits it
// when they changed something; otherwise, or on an error, it rolls it back.
// It returns the transaction's work.
func (s *Store) carry(tx *bolt.Tx, calls []*call) (*txn, error) {
	if err := isStore(tx); err != nil {
		tx.Rollback()
		return nil, err
	}
	x := &txn{store: s, tx: tx, slots: make(map[slotKey]*slot), begun: uint64(tx.ID() - 1)}
	for _, c := range calls {
		c.Err = x.carry(c.Work)
		if c.Err == nil && s.cache != nil {
			x.noteDenied(c.Work)
		}
	}
	dirty, err := x.write()
	if err == nil && dirty {
		err = x.sweep(sweepKeys)
	}
	if err != nil || !dirty {
		tx.Rollback()
		return x, err
	}
	if err := tx.Commit(); err != nil {
		return x, fmt.Errorf("committing: %w", err)
	}
	x.committed = true
	return x, nil
}

// settle brings the deny cache, if any, up to date after a transaction
// (denyCache.settle). The caller holds s.mu.
func (s *Store) settle(h *handle, x *txn, err error) {
	if s.cache != nil {
		s.cache.settle(s.path, h, x, err)
	}
}

// tableOf returns the table of s whose bucket is named bucket, or nil.
func (s *Store) tableOf(bucket []byte) *table {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	for _, t := range s.tables {
		if string(t.bucket) == string(bucket) {
			return t
		}
	}
	return nil
}
