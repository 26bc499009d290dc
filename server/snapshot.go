package server

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/clock"
)

// ErrSnapshotInUse is returned by Run when another process holds the lock
// of the snapshot file: two servers writing one snapshot would each
// overwrite the other's state.
var ErrSnapshotInUse = errors.New("the snapshot file is in use by another process")

// snapshotter keeps the memory store's state in a file across restarts.
type snapshotter struct {
	path    string
	mem     *memstore.Store
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics
	unlock  func()
}

// openSnapshot locks the snapshot file at path (through path.lock), creating
// its directory, and returns its snapshotter.
func openSnapshot(path string, mem *memstore.Store, clk clock.Clock, log *slog.Logger, m *metrics) (*snapshotter, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("the snapshot's directory: %w", err)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	removeStaleTemps(path, log)
	if err := m.registerSnapshots(); err != nil {
		unlock()
		return nil, err
	}
	return &snapshotter{path: path, mem: mem, clock: clk, log: log, metrics: m, unlock: unlock}, nil
}

// removeStaleTemps removes the temporary files that write leaves when the
// process dies before its rename (path.tmp*). The caller holds the
// snapshot's lock, so no other process is writing one.
func removeStaleTemps(path string, log *slog.Logger) {
	dir, base := filepath.Split(path)
	entries, _ := os.ReadDir(cmp.Or(dir, "."))
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), base+".tmp") {
			continue
		}
		f := filepath.Join(dir, e.Name())
		if err := os.Remove(f); err != nil {
			log.Warn("a stale temporary snapshot file could not be removed", "file", f, "err", err)
			continue
		}
		log.Info("removed a temporary snapshot file left by a process that died while writing it", "file", f)
	}
}

// restore loads the snapshot file, if there is one. A snapshot that does
// not load is moved aside to path.corrupt, so that the next snapshot does
// not overwrite it, and logged: the store starts empty.
func (sn *snapshotter) restore() error {
	f, err := os.Open(sn.path)
	if errors.Is(err, fs.ErrNotExist) {
		sn.log.Info("no snapshot to restore: starting empty", "snapshot", sn.path)
		return nil
	}
	if err != nil {
		return fmt.Errorf("restoring the snapshot: %w", err)
	}
	defer f.Close()
	err = sn.mem.ReadSnapshot(bufio.NewReaderSize(f, 64<<10), sn.clock.Now().UnixNano())
	if errors.Is(err, memstore.ErrInvalidSnapshot) {
		aside := sn.path + ".corrupt"
		sn.log.Error("the snapshot does not load: starting empty, the snapshot kept aside", "snapshot", sn.path, "aside", aside, "err", err)
		if rerr := os.Rename(sn.path, aside); rerr != nil {
			return fmt.Errorf("moving a corrupt snapshot aside: %w", rerr)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("restoring the snapshot: %w", err)
	}
	sn.log.Info("snapshot restored", "snapshot", sn.path, "keys", sn.mem.Stats().Keys)
	return nil
}

// save writes a snapshot atomically: to a temporary file in the same
// directory, synced, then renamed over the old one, so that a crash at
// any moment leaves the old snapshot or the new one, whole.
func (sn *snapshotter) save() error {
	start := time.Now()
	err := sn.write()
	if err != nil {
		sn.metrics.snapshots.WithLabelValues("failure").Inc()
		return err
	}
	sn.metrics.snapshots.WithLabelValues("success").Inc()
	sn.metrics.snapshotAge.SetToCurrentTime()
	sn.log.Debug("snapshot written", "snapshot", sn.path, "duration", time.Since(start))
	return nil
}

func (sn *snapshotter) write() error {
	dir, base := filepath.Split(sn.path)
	f, err := os.CreateTemp(dir, base+".tmp*")
	if err != nil {
		return fmt.Errorf("writing the snapshot: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after the rename, nothing there
	w := bufio.NewWriterSize(f, 64<<10)
	err = sn.mem.WriteSnapshot(w, sn.clock.Now().UnixNano())
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, sn.path)
	}
	if err != nil {
		return fmt.Errorf("writing the snapshot: %w", err)
	}
	if d, err := os.Open(filepath.Dir(sn.path)); err == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}

// close releases the snapshot's lock.
func (sn *snapshotter) close() { sn.unlock() }

// startSnapshot opens and restores the memory store's snapshot, if one is
// kept: the file of Options.SnapshotFile, else of the configuration, else
// Options.DefaultSnapshotFile; none for "off", or for a store other than
// the memory store.
func (in *instance) startSnapshot() error {
	if in.mem == nil {
		return nil
	}
	path := cmp.Or(in.o.SnapshotFile, in.cfg.SnapshotFile())
	byDefault := path == ""
	if byDefault {
		path = in.o.DefaultSnapshotFile
	}
	if path == "" || path == "off" {
		in.log.Info("no snapshot: the memory store's state is lost at exit")
		return nil
	}
	snap, err := openSnapshot(path, in.mem, in.clk, in.log, in.metrics)
	if err != nil && byDefault && !errors.Is(err, ErrSnapshotInUse) {
		// The default place is unusable (a read-only home, say): serve
		// anyway, as a first run must, and say so.
		in.log.Warn("no snapshot: the default snapshot file is unusable, and the memory store's state is lost at exit", "snapshot", path, "err", err)
		return nil
	}
	if err != nil {
		return err
	}
	if err := snap.restore(); err != nil {
		snap.close()
		return err
	}
	in.snap = snap
	return nil
}

// startSnapshotLoop starts writing the snapshot every snapshotInterval,
// if one is kept and the interval is not 0, in a goroutine of wg until
// ctx is done.
func (in *instance) startSnapshotLoop(ctx context.Context, wg *sync.WaitGroup) {
	if in.snap == nil {
		return
	}
	if every := snapshotInterval(in.o, in.cfg); every > 0 {
		wg.Go(func() { snapshotLoop(ctx, in.clk, every, in.snap, in.log) })
	}
}

// saveSnapshot writes the snapshot at shutdown, if one is kept, and logs
// how it went.
func (in *instance) saveSnapshot() error {
	if in.snap == nil {
		return nil
	}
	if err := in.snap.save(); err != nil {
		in.log.Error("the snapshot at shutdown failed", "snapshot", in.snap.path, "err", err)
		return err
	}
	in.log.Info("snapshot written", "snapshot", in.snap.path, "keys", in.mem.Stats().Keys)
	return nil
}

// snapshotInterval is how often to write the snapshot: the option's, else
// the configuration's, else the default.
func snapshotInterval(o Options, cfg *Config) time.Duration {
	switch {
	case o.SnapshotInterval != nil:
		return *o.SnapshotInterval
	case cfg.Snapshot.Interval != nil:
		return *cfg.Snapshot.Interval
	}
	return DefaultSnapshotInterval
}

// snapshotLoop writes the snapshot every interval on clk until ctx is done.
func snapshotLoop(ctx context.Context, clk clock.Clock, every time.Duration, snap *snapshotter, log *slog.Logger) {
	for {
		t := clk.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if err := snap.save(); err != nil {
			log.Error("the snapshot failed", "snapshot", snap.path, "err", err)
		}
	}
}
