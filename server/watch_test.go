package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A file replaced by another of the same size, with the same modification
// time (two writes within one tick of the file system's clock), changes
// the fingerprint: the watcher reads contents, not sizes and times.
func TestFingerprintSeesSameSizeChanges(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "floodgate.yaml")
	mtime := time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)
	write := func(text string) {
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(cfg, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	write("policies: {a: fixed-window 1/1h}\n")
	before := fingerprint(cfg, dir)
	write("policies: {b: fixed-window 2/1h}\n")
	if fingerprint(cfg, dir) == before {
		t.Error("same size, same time, other contents: the fingerprint did not change")
	}
	if fingerprint(cfg, dir) != fingerprint(cfg, dir) {
		t.Error("the fingerprint of unchanged files changed")
	}
}
