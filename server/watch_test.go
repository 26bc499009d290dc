package server

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
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
	first, second := fingerprint(cfg, dir), fingerprint(cfg, dir)
	if first != second {
		t.Error("the fingerprint of unchanged files changed")
	}
}

// A change made after the files were read but before the watch starts
// (the watch runs in a goroutine of its own, which may start late) is
// seen at the first look; an unchanged file calls nothing.
func TestWatchSeesChangesBeforeItStarts(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "floodgate.yaml")
	if err := os.WriteFile(cfg, []byte("policies: {a: fixed-window 1/1h}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	read := fingerprint(cfg) // as Run takes it when it reads the file
	if err := os.WriteFile(cfg, []byte("policies: {b: fixed-window 2/1h}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	changes := make(chan struct{}, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		watch(ctx, clk, time.Second, read, func() []string { return []string{cfg} }, func() { changes <- struct{}{} })
	}()
	for look := range 3 {
		clk.WaitTimers(1)
		clk.Advance(time.Second)
		if look == 0 {
			select { // the change made before the watch started
			case <-changes:
			case <-time.After(10 * time.Second): // a failure's bound, not time for the watch
				t.Fatal("the change made before the watch started was not seen")
			}
		}
	}
	clk.WaitTimers(1) // the fourth look is waiting: the second and third saw nothing
	cancel()
	<-done
	if n := len(changes); n != 0 {
		t.Errorf("%d changes reported for a file that did not change again", n)
	}
}
