//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filestore_test

import (
	"bufio"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/memstore"
)

// A Store with a deny cache floods a key of its own while a child
// process commits to the same file as fast as it can, then while the
// child is stopped (SIGSTOP) at a random moment, perhaps holding the
// file's lock or in the middle of a commit, then after it is killed
// (SIGKILL): every decision is the memory store's, or, while the child
// holds the lock, fails with ErrLocked having done nothing. While the
// child is stopped, denials are answered from the cache unless its last
// commit had become visible (then the file is needed, and locked); after
// it is killed, they are again.
func TestChaosDenyCacheOtherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := cachedStore(t, path, filestore.WithLockTimeout(20*time.Millisecond))
	p := algo.MustParsePolicy("token-bucket 5/1s")
	tb, _ := s.Table("mine", p)
	mem, _ := memstore.New(0).Table("mine", p)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 3))
	now := t0
	locked := 0
	// flood decides n times, and on for at least d while others runs.
	flood := func(phase string, n int, d time.Duration) (hits uint64) {
		t.Helper()
		before := s.CacheStats().Hits
		for i, end := 0, time.Now().Add(d); i < n || time.Now().Before(end); i++ {
			now += r.Int64N(int64(2 * time.Millisecond))
			d, err := tb.Decide(ctx, "p", now, 1)
			if errors.Is(err, filestore.ErrLocked) {
				locked++
				continue // nothing was done
			}
			want, _ := mem.Decide(ctx, "p", now, 1)
			if err != nil || d != want {
				t.Fatalf("%s, decision %d at %d: %+v %v, want %+v", phase, i, now, d, err, want)
			}
		}
		return s.CacheStats().Hits - before
	}
	flood("alone", 100, 0)

	cmd := child("kill", "CHILD_PATH="+path, "CHILD_POLICY=fixed-window 1000000000/1h")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatal("the child admitted nothing")
	}
	go func() {
		for sc.Scan() {
		}
	}()
	flushes := s.CacheStats().Flushes
	busy := flood("the child committing", 300, 20*time.Millisecond)
	flushes = s.CacheStats().Flushes - flushes
	time.Sleep(time.Duration(r.Int64N(int64(5 * time.Millisecond)))) // the moment of the stop
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := flood("the child stopped", 50, 0)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed := flood("the child killed", 300, 0)
	t.Logf("hits: %d while the child committed (the cache flushed %d times), %d while it was stopped, %d after it was killed; %d decisions failed with ErrLocked",
		busy, flushes, stopped, killed, locked)
	if flushes == 0 || killed == 0 {
		t.Error("the child's commits flushed no cache, or no denial was answered from the cache after it was killed")
	}
}
