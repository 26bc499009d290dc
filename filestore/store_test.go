package filestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
	bolt "go.etcd.io/bbolt"
)

var ctx = context.Background()

// t0 is a realistic time: 2026-11-22 in nanoseconds since the Unix epoch.
const t0 = int64(1795305600) * int64(time.Second)

// newStore returns a store on a new file of its own.
func newStore(t testing.TB, opts ...filestore.Option) *filestore.Store {
	t.Helper()
	return openStore(t, filepath.Join(t.TempDir(), "state.db"), opts...)
}

func openStore(t testing.TB, path string, opts ...filestore.Option) *filestore.Store {
	t.Helper()
	s, err := filestore.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func table(t testing.TB, s store.Store, name, policy string) store.Table {
	t.Helper()
	tb, err := s.Table(name, algo.MustParsePolicy(policy))
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// holdFile opens path with bbolt directly, and so locks it, until the
// returned function is called.
func holdFile(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := bolt.Open(path, 0o666, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() { once.Do(func() { db.Close() }) }
	t.Cleanup(release)
	return release
}

// view runs f in a read-only transaction on the file at path.
func view(t *testing.T, path string, f func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o666, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(f); err != nil {
		t.Fatal(err)
	}
}

// update runs f in a read-write transaction on the file at path.
func update(t *testing.T, path string, f func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o666, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(f); err != nil {
		t.Fatal(err)
	}
}

// keyCounts returns the number of keys in each bucket of the file but the
// store's own.
func keyCounts(t *testing.T, path string) map[string]int {
	t.Helper()
	n := map[string]int{}
	view(t, path, func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if string(name) != "%floodgate" {
				n[string(name)] = b.Stats().KeyN
			}
			return nil
		})
	})
	return n
}

// The conformance suite, opening the file for every call, and holding it.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t) })
}

func TestConformanceHold(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return newStore(t, filestore.WithHold()) })
}

// Open creates the file, and only the file; not its directory.
func TestOpenCreatesOnlyTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "limits.db")
	s := openStore(t, path)
	tb := table(t, s, "n", "fixed-window 2/1m")
	if d, err := tb.Decide(ctx, "k", t0, 1); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != "limits.db" {
		t.Fatalf("the directory holds %v (%v), want just limits.db", entries, err)
	}
	if _, err := filestore.Open(filepath.Join(dir, "missing", "x.db")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a file in a missing directory: %v", err)
	}
	if _, err := filestore.Open(path, filestore.WithLockTimeout(-1)); !errors.Is(err, filestore.ErrInvalidOption) {
		t.Fatalf("a negative lock timeout: %v", err)
	}
}

// A second Store on the same file, in this process, shares the state.
func TestStoresShareTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	a, b := openStore(t, path), openStore(t, path)
	ta, tb := table(t, a, "n", "fixed-window 3/1m"), table(t, b, "n", "fixed-window 3/1m")
	for i, x := range []store.Table{ta, tb, ta, tb} {
		d, err := x.Decide(ctx, "k", t0, 1)
		if err != nil || d.Allowed != (i < 3) {
			t.Fatalf("decision %d: %+v %v", i, d, err)
		}
	}
}

// A file held by another past the lock timeout is ErrLocked, naming the
// file, for Decide, Apply and Open alike.
func TestLockTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path, filestore.WithLockTimeout(50*time.Millisecond))
	tb := table(t, s, "n", "fixed-window 3/1m")
	release := holdFile(t, path)
	start := time.Now()
	_, err := tb.Decide(ctx, "k", t0, 1)
	if !errors.Is(err, filestore.ErrLocked) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Decide on a held file: %v, want ErrLocked naming %s", err, path)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond || waited > 5*time.Second {
		t.Errorf("waited %v for a lock timeout of 50ms", waited)
	}
	ops := []store.Op{{Kind: store.OpDecide, Table: tb, Key: "k", Now: t0, N: 1}}
	if err := s.Apply(ctx, ops); !errors.Is(err, filestore.ErrLocked) {
		t.Fatalf("Apply on a held file: %v", err)
	}
	if _, err := filestore.Open(path, filestore.WithLockTimeout(0)); !errors.Is(err, filestore.ErrLocked) {
		t.Fatalf("Open of a held file: %v", err)
	}
	release()
	if d, err := tb.Decide(ctx, "k", t0, 1); err != nil || d.Remaining != 2 {
		t.Fatalf("once released: %+v %v (a failed call spent?)", d, err)
	}
}

// A caller's context ends its wait for the file, and the call does
// nothing; the calls waiting with it go on once the file is free.
func TestContextEndsTheWait(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path, filestore.WithLockTimeout(time.Hour))
	tb := table(t, s, "n", "fixed-window 10/1m")
	release := holdFile(t, path)

	// A lone caller.
	c1, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := tb.Decide(c1, "k", t0, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Decide with a deadline on a held file: %v", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("waited %v past a 30ms deadline", waited)
	}

	// Callers waiting together: the first waits for the lock, the others
	// in the queue; three give up, the first among them.
	type result struct {
		d   algo.Decision
		err error
	}
	var results [6]chan result
	var cancels [6]context.CancelFunc
	for i := range results {
		c, cancel := context.WithCancel(ctx)
		defer cancel()
		results[i], cancels[i] = make(chan result, 1), cancel
		go func() {
			d, err := tb.Decide(c, "k", t0, 1)
			results[i] <- result{d, err}
		}()
		if i == 0 {
			waitFor(t, func() bool { return filestore.Busy(s) })
		} else {
			waitFor(t, func() bool { return filestore.PendingCalls(s) == i })
		}
	}
	for _, i := range []int{0, 2, 4} {
		cancels[i]()
		if r := <-results[i]; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("caller %d, cancelled while the file is held: %+v %v", i, r.d, r.err)
		}
	}
	release()
	for _, i := range []int{1, 3, 5} {
		if r := <-results[i]; r.err != nil || !r.d.Allowed {
			t.Fatalf("caller %d: %+v %v", i, r.d, r.err)
		}
	}
	if d, err := tb.Decide(ctx, "k", t0, 0); err != nil || d.Remaining != 7 {
		t.Fatalf("3 admitted, but %d spent (%v)", 10-d.Remaining, err)
	}
}

// A transaction that waits for the file stops waiting once every one of
// its callers has left: their calls are withdrawn, and do nothing, and
// the store is idle again while the file is still held.
func TestAbandonedTransactionStopsWaiting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path, filestore.WithLockTimeout(time.Hour))
	tb := table(t, s, "n", "fixed-window 10/1m")
	release := holdFile(t, path)
	// The first caller waits for the file itself, two more behind it.
	var errs [3]chan error
	var cancels [3]context.CancelFunc
	for i := range errs {
		c, cancel := context.WithCancel(ctx)
		defer cancel()
		errs[i], cancels[i] = make(chan error, 1), cancel
		go func() {
			_, err := tb.Decide(c, "k", t0, 1)
			errs[i] <- err
		}()
		if i == 0 {
			waitFor(t, func() bool { return filestore.Busy(s) })
		} else {
			waitFor(t, func() bool { return filestore.PendingCalls(s) == i })
		}
	}
	// The first leaves, and a transaction takes the other two, and waits
	// for the file in turn; they leave too.
	cancels[0]()
	if err := <-errs[0]; !errors.Is(err, context.Canceled) {
		t.Fatalf("caller 0: %v", err)
	}
	waitFor(t, func() bool { return filestore.PendingCalls(s) == 0 })
	for _, i := range []int{1, 2} {
		cancels[i]()
		if err := <-errs[i]; !errors.Is(err, context.Canceled) {
			t.Fatalf("caller %d: %v", i, err)
		}
	}
	waitFor(t, func() bool { return !filestore.Busy(s) })
	release()
	if d, err := tb.Decide(ctx, "k", t0, 0); err != nil || d.Remaining != 10 {
		t.Fatalf("after every caller left: %+v %v, want 10 remaining", d, err)
	}
}

// waitFor polls cond, which other goroutines make true, for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}

// WithHold keeps the file locked until Close: other Stores wait, and fail
// after their lock timeout; after Close they see the state.
func TestHoldExcludesOthers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	owner := openStore(t, path, filestore.WithHold())
	tb := table(t, owner, "n", "fixed-window 3/1m")
	if _, err := tb.Decide(ctx, "k", t0, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := filestore.Open(path, filestore.WithLockTimeout(20*time.Millisecond)); !errors.Is(err, filestore.ErrLocked) {
		t.Fatalf("Open while another holds the file: %v", err)
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Decide(ctx, "k", t0, 1); !errors.Is(err, filestore.ErrClosed) {
		t.Fatalf("Decide after Close: %v", err)
	}
	if err := owner.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	other := openStore(t, path, filestore.WithLockTimeout(20*time.Millisecond))
	if d, err := table(t, other, "n", "fixed-window 3/1m").Decide(ctx, "k", t0, 0); err != nil || d.Remaining != 1 {
		t.Fatalf("after the owner closed: %+v %v", d, err)
	}
}

// A value that is not a state of the table's algorithm is ErrCorrupt,
// naming the key, and its call changes nothing; other calls go on.
func TestCorruptValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	tb := table(t, s, "n", "token-bucket 5/1m")
	for _, k := range []string{"bad", "good", "other-alg"} {
		if _, err := tb.Decide(ctx, k, t0, 1); err != nil {
			t.Fatal(err)
		}
	}
	fw := algo.MustParsePolicy("fixed-window 5/1m")
	update(t, path, func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("n@token-bucket 5/1m"))
		if b == nil {
			return fmt.Errorf("no bucket n@token-bucket 5/1m")
		}
		if err := b.Put([]byte("bad"), []byte("garbage")); err != nil {
			return err
		}
		// A well-formed state of another algorithm (algo.State's encoding).
		return b.Put([]byte("other-alg"), []byte{1, byte(fw.Algorithm()), 0, 1, 0})
	})
	for _, k := range []string{"bad", "other-alg"} {
		_, err := tb.Decide(ctx, k, t0, 1)
		if !errors.Is(err, filestore.ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("%q", k)) {
			t.Fatalf("Decide on %q: %v, want ErrCorrupt naming the key", k, err)
		}
		ops := []store.Op{
			{Kind: store.OpDecide, Table: tb, Key: "good", Now: t0, N: 1},
			{Kind: store.OpDecide, Table: tb, Key: k, Now: t0, N: 1},
		}
		if err := s.Apply(ctx, ops); !errors.Is(err, filestore.ErrCorrupt) {
			t.Fatalf("Apply with %q: %v", k, err)
		}
	}
	if d, err := tb.Decide(ctx, "good", t0, 0); err != nil || d.Remaining != 4 {
		t.Fatalf("a failed Apply spent units: %+v %v", d, err)
	}
	view(t, path, func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("n@token-bucket 5/1m")).Get([]byte("bad")); string(v) != "garbage" {
			t.Errorf("the corrupt value became %q", v)
		}
		return nil
	})
	// A reset needs no state: it deletes the corrupt value.
	if err := s.Apply(ctx, []store.Op{{Kind: store.OpReset, Table: tb, Key: "bad", Now: t0}}); err != nil {
		t.Fatalf("a reset of a corrupt key: %v", err)
	}
	if d, err := tb.Decide(ctx, "bad", t0, 1); err != nil || d.Remaining != 4 {
		t.Fatalf("after the reset: %+v %v", d, err)
	}

	// A file that is not a database at all.
	junk := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database ", 1000)), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := filestore.Open(junk); !errors.Is(err, filestore.ErrNotStore) || !strings.Contains(err.Error(), junk) {
		t.Fatalf("Open of a file that is not a database: %v", err)
	}
}

// Keys bbolt cannot hold are ErrInvalidKey, before anything is done; the
// empty key and keys starting with NUL are kept apart from the others.
func TestBadKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	tb := table(t, s, "n", "fixed-window 1/1m")
	long := strings.Repeat("k", bolt.MaxKeySize+1)
	if _, err := tb.Decide(ctx, long, t0, 1); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("a key of %d bytes: %v", len(long), err)
	}
	nulLong := "\x00" + strings.Repeat("k", bolt.MaxKeySize-1) // stored with one more byte
	ops := []store.Op{
		{Kind: store.OpDecide, Table: tb, Key: "fine", Now: t0, N: 1},
		{Kind: store.OpDecide, Table: tb, Key: nulLong, Now: t0, N: 1},
	}
	if err := s.Apply(ctx, ops); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("Apply with a key bbolt cannot hold: %v", err)
	}
	keys := []string{"", "\x00", "\x00\x00", "k", "\x00k", strings.Repeat("k", bolt.MaxKeySize)}
	for _, k := range keys {
		if d, err := tb.Decide(ctx, k, t0, 1); err != nil || !d.Allowed {
			t.Fatalf("key %q: %+v %v (keys collide?)", k, d, err)
		}
	}
	if n := keyCounts(t, path)["n@fixed-window 1/1m"]; n != len(keys) {
		t.Fatalf("%d keys stored, want %d", n, len(keys))
	}
	if _, err := s.Table(strings.Repeat("n", bolt.MaxKeySize), algo.MustParsePolicy("fixed-window 1/1m")); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("a limiter name too long for a bucket: %v", err)
	}
	if _, err := s.Table("n", algo.Policy{}); !errors.Is(err, algo.ErrInvalidPolicy) {
		t.Fatalf("the zero Policy: %v", err)
	}
}

// Tables are named as in redisstore, escaped, and a table named after its
// policy is named by it alone.
func TestBucketNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	p := "sliding-window 3/1s"
	for _, name := range []string{p, "a:b{c}@d%e", ""} {
		if _, err := table(t, s, name, p).Decide(ctx, "k", t0, 1); err != nil {
			t.Fatal(err)
		}
	}
	got := keyCounts(t, path)
	want := map[string]int{p: 1, "a%3Ab%7Bc%7D%40d%25e@" + p: 1, "@" + p: 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
}

// A key whose state has drained is deleted by the call that finds it so,
// and each write sweeps other keys: after time passes, a few calls leave
// only the live keys, and no empty table.
func TestDrainedKeysDeleted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	policies := []string{"fixed-window 5/1m", "token-bucket 5/1m", "sliding-log 5/1m", "sliding-window 5/1m", "leaky-bucket 5/1m"}
	const perTable = 30
	for _, pol := range policies {
		tb := table(t, s, "t", pol)
		var ops []store.Op
		for i := range perTable {
			ops = append(ops, store.Op{Kind: store.OpDecide, Table: tb, Key: fmt.Sprint("k", i), Now: t0, N: 1})
		}
		if err := s.Apply(ctx, ops); err != nil {
			t.Fatal(err)
		}
	}
	total := 0
	for _, n := range keyCounts(t, path) {
		total += n
	}
	if total != perTable*len(policies) {
		t.Fatalf("%d keys stored, want %d", total, perTable*len(policies))
	}
	// Three minutes later every state has drained; a call on each table
	// moves its clock there, and a few calls on another sweep the rest.
	later := t0 + 3*time.Minute.Nanoseconds()
	want := map[string]int{}
	for _, pol := range policies {
		if _, err := table(t, s, "t", pol).Decide(ctx, "new", later, 1); err != nil {
			t.Fatal(err)
		}
		want["t@"+pol] = 1
	}
	live := table(t, s, "live", "fixed-window 5/1m")
	calls := (perTable*len(policies))/filestore.SweepKeys + 2
	for i := range calls {
		if _, err := live.Decide(ctx, fmt.Sprint("new", i), later, 1); err != nil {
			t.Fatal(err)
		}
	}
	want["live@fixed-window 5/1m"] = calls
	if got := keyCounts(t, path); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after %d calls: %v, want only the live keys, %v", calls, got, want)
	}
	// A peek at a drained key deletes it too; a live key stays.
	hourly := table(t, s, "hourly", "fixed-window 5/1h")
	hour := time.Hour.Nanoseconds() // t0 is on the hour
	for _, d := range []struct {
		key   string
		at, n int64
	}{{"x", t0 + 1, 1}, {"y", t0 + hour + 1, 1}, {"x", t0 + hour + 2, 0}} {
		if _, err := hourly.Decide(ctx, d.key, d.at, d.n); err != nil {
			t.Fatal(err)
		}
	}
	if got := keyCounts(t, path); got["hourly@fixed-window 5/1h"] != 1 {
		t.Fatalf("after a peek at a drained key: %v, want 1 key (y) in hourly", got)
	}
}

// Decisions that change nothing (denials, peeks) commit nothing: the
// file's transaction id stays put.
func TestDenialsWriteNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	tb := table(t, s, "n", "fixed-window 1/1m")
	if _, err := tb.Decide(ctx, "k", t0, 1); err != nil {
		t.Fatal(err)
	}
	txid := func() (id int) {
		view(t, path, func(tx *bolt.Tx) error { id = tx.ID(); return nil })
		return id
	}
	before := txid()
	for range 5 {
		if d, err := tb.Decide(ctx, "k", t0+1, 1); err != nil || d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
		if _, err := tb.Decide(ctx, "k", t0+1, 0); err != nil {
			t.Fatal(err)
		}
	}
	if after := txid(); after != before {
		t.Fatalf("denials and peeks committed %d transactions", after-before)
	}
}

// Calls that arrive while the file is taken share one transaction, each
// decided as if alone: while the file is held, one call waits for the
// lock and 99 queue; once free, they take two transactions, and exactly
// LIMIT of the 100 are admitted.
func TestWaitingCallsShareATransaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	tb := table(t, s, "n", "sliding-log 40/1h")
	txid := func() (id int) {
		view(t, path, func(tx *bolt.Tx) error { id = tx.ID(); return nil })
		return id
	}
	before := txid()
	release := holdFile(t, path)
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range 100 {
		wg.Go(func() {
			d, err := tb.Decide(ctx, "hot", t0, 1)
			if err != nil {
				t.Error(err)
			}
			if d.Allowed {
				admitted.Add(1)
			}
		})
	}
	waitFor(t, func() bool { return filestore.PendingCalls(s) == 99 })
	release()
	wg.Wait()
	if n := admitted.Load(); n != 40 {
		t.Errorf("%d of 100 admitted, want 40", n)
	}
	if n := txid() - before; n != 2 {
		t.Errorf("%d transactions for 100 calls (1 waiting for the lock, 99 queued), want 2", n)
	}
}

// Each table is swept by its own clock, the latest time its own ops used:
// ops far in the future on one table (floodgate check --now 2030-01-01,
// or a simulate run of a future trace) delete nothing of another table
// decided at the real time, and ops at the real time delete nothing of a
// table whose times are in the future.
func TestSweepGoesByEachTablesClock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	real := table(t, s, "sms", "sliding-log 3/1h")
	for range 3 {
		if d, err := real.Decide(ctx, "k", t0, 1); err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}
	future := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	sim := table(t, s, "sim", "token-bucket 10/1h")
	if _, err := sim.Decide(ctx, "x", future, 10); err != nil {
		t.Fatal(err)
	}
	// Enough writes on each table for the sweep to go round the file.
	for i := range 3 * filestore.SweepKeys {
		if _, err := sim.Decide(ctx, fmt.Sprint("f", i), future, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := table(t, s, "other", "fixed-window 1/1s").Decide(ctx, fmt.Sprint("r", i), t0+int64(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := real.Decide(ctx, "k", t0+time.Minute.Nanoseconds(), 1); err != nil || d.Allowed {
		t.Fatalf("a 4th sliding-log 3/1h event within the hour: %+v %v, want refused", d, err)
	}
	if d, err := sim.Decide(ctx, "x", future, 1); err != nil || d.Allowed {
		t.Fatalf("the simulated key, spent in 2030: %+v %v, want refused", d, err)
	}
	if n := keyCounts(t, path)["sim@token-bucket 10/1h"]; n != 1+3*filestore.SweepKeys {
		t.Fatalf("%d keys left of the simulated table, want all %d", n, 1+3*filestore.SweepKeys)
	}
}

// One table used at two clocks far apart: ops years ahead sweep keys the
// real time has not seen drain, and those keys, read again at the real
// time, are refused until they would have drained (their slot of the
// table's horizon), never admitted afresh; later they decide as new.
func TestOneTableTwoClocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path)
	tb := table(t, s, "sms", "sliding-log 3/1h")
	for range 3 {
		if d, err := tb.Decide(ctx, "k", t0, 1); err != nil || !d.Allowed {
			t.Fatalf("%+v %v", d, err)
		}
	}
	future := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for i := range 3 * filestore.SweepKeys {
		if _, err := tb.Decide(ctx, fmt.Sprint("f", i), future, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := keyCounts(t, path)["sms@sliding-log 3/1h"]; n != 3*filestore.SweepKeys {
		t.Fatalf("%d keys in the table, want the %d of 2030 (k swept)", n, 3*filestore.SweepKeys)
	}
	minute, hour := time.Minute.Nanoseconds(), time.Hour.Nanoseconds()
	d, err := tb.Decide(ctx, "k", t0+minute, 1)
	if err != nil || d.Allowed || d.RetryAfter != 59*time.Minute {
		t.Fatalf("a 4th event within the hour after k was swept: %+v %v, want refused for 59m", d, err)
	}
	admitted := 0
	for i := range 8 { // new keys: most fall in other slots
		if d, err := tb.Decide(ctx, fmt.Sprint("new", i), t0+minute, 1); err != nil {
			t.Fatal(err)
		} else if d.Allowed {
			admitted++
		}
	}
	if admitted == 0 {
		t.Fatal("every new key refused")
	}
	if d, err := tb.Decide(ctx, "k", t0+hour, 3); err != nil || !d.Allowed {
		t.Fatalf("k once its events have left the hour: %+v %v", d, err)
	}
}
