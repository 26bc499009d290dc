package filestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/store"
)

// A file truncated between the deny cache's stat and its read of the
// mapped meta pages (the read then faults: SIGBUS) is a miss, not a
// crash: here the view takes the truncated file's status, as if the
// stat had come just before the truncation.
func TestChaosDenyCacheFaultingMapping(t *testing.T) {
	path, s, _ := deniedKey(t)
	v := s.cache.file
	if v == nil || !v.current(path) {
		t.Fatal("no view of the file after a denial")
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	var err error
	if v.fi, err = os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if v.current(path) {
		t.Error("a truncated file's meta pages read as current")
	}
}

// The freelist guard fails closed: on a file none of whose meta pages it
// can read (damaged, or a bbolt whose layout is not the one
// boltformat.go reads), it refuses the file, saying why, rather than let
// a transaction free a freelist it could not check.
func TestFreelistGuardFailsClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(path, make([]byte, 4*os.Getpagesize()), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = checkFreelist(f)
	if !errors.Is(err, ErrCorrupt) || !errors.Is(err, errBoltLayout) || !strings.Contains(err.Error(), "bbolt "+boltVersion) {
		t.Fatalf("the freelist guard on unreadable meta pages: %v, want ErrCorrupt naming bbolt %s's layout", err, boltVersion)
	}
	// Open still lets bbolt say what is wrong with such a file.
	if err := refuseEmpty(f); err != nil {
		t.Fatalf("refuseEmpty on unreadable meta pages: %v, want bbolt to judge", err)
	}
}

// When the deny cache turns off, CacheStats says why: after a failed
// transaction, its error; after meta pages that do not name the
// transaction bbolt committed, both ids and bbolt's layout.
func TestDenyCacheReportsWhyOff(t *testing.T) {
	path, s, tb := deniedKey(t)
	if st := s.CacheStats(); !st.Live || st.Err != nil {
		t.Fatalf("after a denial: %+v, want live", st)
	}
	v := s.cache.file
	err := v.advance(v.fi, v.txid+5)
	if !errors.Is(err, errBoltLayout) || !strings.Contains(err.Error(), fmt.Sprintf("transaction %d, bbolt committed %d", v.txid, v.txid+5)) {
		t.Errorf("meta pages one transaction behind bbolt: %v, want both ids and bbolt's layout", err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil { // no longer a store
		t.Fatal(err)
	}
	_, derr := tb.Decide(context.Background(), "k", 1, 1)
	if st := s.CacheStats(); st.Live || !errors.Is(st.Err, ErrNotStore) {
		t.Errorf("after a failed transaction (%v): %+v, want off, its Err the failure", derr, st)
	}
}

// Invariant 5: filled past its bound, the cache evicts to stay within
// it, bytes counting exactly what it holds; a key too large for the
// bound is not kept.
func TestDenyCacheBound(t *testing.T) {
	const bound = 2000 // about a dozen entries
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), WithDenyCache(bound))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, _ := s.Table("api", algo.MustParsePolicy("fixed-window 1/1h"))
	deny := func(key string) {
		for range 2 {
			tb.Decide(context.Background(), key, 1, 1)
		}
	}
	for i := range 50 {
		deny(fmt.Sprint("k", i))
		if err := s.cache.check(); err != nil {
			t.Fatalf("after %d keys denied: %v", i+1, err)
		}
	}
	st := s.CacheStats()
	if st.Evictions == 0 || st.Bytes > bound || st.Entries == 0 {
		t.Errorf("50 keys denied in a cache of %d bytes: %+v, want evictions, within the bound", bound, st)
	}
	deny(strings.Repeat("x", bound))
	if got := s.CacheStats(); got.Fills != st.Fills {
		t.Errorf("a key larger than the bound was kept: %+v", got)
	}
	if err := s.cache.check(); err != nil {
		t.Error(err)
	}
}

// Invariant 4: the cache answers only what the cached state denies: a
// peek, and a decision in the next window (admitted), go to the file; a
// denial does not.
func TestDenyCacheAnswersDenialsOnly(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "state.db"), WithDenyCache(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	tb, _ := s.Table("api", algo.MustParsePolicy("fixed-window 1/1h"))
	for range 2 {
		tb.Decide(ctx, "k", 1, 1) // admitted, then denied: filled
	}
	for _, c := range []struct {
		name      string
		now, n    int64
		allowed   bool
		fromCache bool
	}{
		{"a denial", 2, 1, false, true},
		{"a peek", 2, 0, true, false},
		{"a decision in the next window", 1 + int64(time.Hour), 1, true, false},
	} {
		hits, txns := s.CacheStats().Hits, s.transactions.Load()
		d, err := tb.Decide(ctx, "k", c.now, c.n)
		fromCache := s.CacheStats().Hits == hits+1 && s.transactions.Load() == txns
		if err != nil || d.Allowed != c.allowed || fromCache != c.fromCache {
			t.Errorf("%s: %+v %v, from the cache: %v; want allowed %v, from the cache %v", c.name, d, err, fromCache, c.allowed, c.fromCache)
		}
	}
}

// deniedKey returns the path of a new file store with a deny cache, the
// store (closed when t ends) and a table of fixed-window 1/1h whose key
// "k" was admitted once and denied once.
func deniedKey(t *testing.T) (string, *Store, store.Table) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, WithDenyCache(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	tb, _ := s.Table("api", algo.MustParsePolicy("fixed-window 1/1h"))
	for range 2 {
		tb.Decide(context.Background(), "k", 1, 1)
	}
	return path, s, tb
}
