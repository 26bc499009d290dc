package filestore

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/floodgate/floodgate/algo"
)

// A file truncated between the deny cache's stat and its read of the
// mapped meta pages (the read then faults: SIGBUS) is a miss, not a
// crash: here the view takes the truncated file's status, as if the
// stat had come just before the truncation.
func TestChaosDenyCacheFaultingMapping(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(path, WithDenyCache(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb, _ := s.Table("api", algo.MustParsePolicy("fixed-window 1/1h"))
	for range 2 {
		tb.Decide(context.Background(), "k", 1, 1)
	}
	v := s.cache.file
	if v == nil || !v.current(path) {
		t.Fatal("no view of the file after a denial")
	}
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if v.fi, err = os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if v.current(path) {
		t.Error("a truncated file's meta pages read as current")
	}
}
