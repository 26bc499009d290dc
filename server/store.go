package server

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/floodgate/floodgate/failsafe"

	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"

	"github.com/floodgate/floodgate/storeurl"
)

// storeName is a store URL without its password (storeurl.Redact), for
// the logs.
func storeName(url string) string {
	if url == "" {
		return "memory"
	}
	return storeurl.Redact(url)
}

// newMemory returns a memory store bounded as the options and the
// configuration say.
func (in *instance) newMemory() *memstore.Store {
	return memstore.New(in.cfg.Store.MaxKeys, memstore.MaxBytes(in.memoryBound()))
}

// memoryBound is the memory store's bound in bytes.
func (in *instance) memoryBound() int64 {
	return cmp.Or(in.o.MaxMemoryBytes, in.cfg.Store.MaxBytes, memstore.DefaultMaxBytes)
}

// memoryHeadroom is what limitMemory allows beyond the stores' bounds for
// the rest of the process: connections, buffers, metrics.
const memoryHeadroom = 64 << 20

// limitMemory sets the Go runtime's soft memory limit, with
// Options.SetMemoryLimit and no GOMEMLIMIT in the environment, to the
// bytes the stores are bounded to (the memory store, the failsafe's local
// one, a deny cache) and a quarter more, for the garbage a flood leaves
// between collections, plus memoryHeadroom. Without it the heap of a
// flood ran to 2.4 times --max-memory before the collector caught up.
func (in *instance) limitMemory() {
	if !in.o.SetMemoryLimit || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	var bound int64
	if in.mem != nil || in.local != nil {
		bound += in.memoryBound()
	}
	if in.mem == nil && in.o.DenyCacheBytes >= 0 {
		bound += cmp.Or(in.o.DenyCacheBytes, DefaultDenyCacheBytes)
	}
	limit := bound + bound/4 + memoryHeadroom
	debug.SetMemoryLimit(limit)
	in.log.Info("the Go runtime's memory limit is set from the store's bounds (GOMEMLIMIT overrides it)", "bytes", limit)
}

// openStore opens the store that Options.Store names: the memory store
// itself, or another wrapped in a failsafe.Store with the configuration's
// failure mode (and its local store, for FailLocal). It is the one
// function that makes the stores Run decides on.
func (in *instance) openStore() error {
	url, cfg := in.o.Store, in.cfg
	if url == "" || url == "memory" || url == "memory:" {
		in.mem = in.newMemory()
		in.store = in.mem
		return nil
	}
	var opts []storeurl.Option
	if n := in.o.DenyCacheBytes; n >= 0 {
		opts = append(opts, storeurl.WithDenyCache(cmp.Or(n, DefaultDenyCacheBytes)))
	}
	// The deny cache's going off and on, with the reason, in the log.
	opts = append(opts, storeurl.WithRedisOptions(redisstore.WithLogger(in.log.With("store", storeName(url))),
		redisstore.WithCounters(!in.o.EnvoyTableCounters)))
	s, closer, err := storeurl.Open(url, opts...)
	if err != nil {
		return fmt.Errorf("--store: %w", err)
	}
	timeout := DefaultStoreTimeout
	if strings.HasPrefix(url, "file:") {
		timeout = DefaultFileStoreTimeout // a transaction waits for the disk (fsync) and for other processes
	}
	fo := cfg.failsafeOptions(timeout)
	fo.Logger = in.log.With("store", storeName(url))
	if fo.Mode == failsafe.FailLocal {
		in.local = in.newMemory()
		fo.Local = in.local
	}
	in.closeStore = func() { closeQuietly(closer, in.log) }
	fs, err := failsafe.New(s, fo)
	if err != nil {
		return fmt.Errorf("--store: %w", err)
	}
	in.store = fs
	return nil
}

// closeQuietly closes c, the store, and logs an error rather than return
// it: at the end of Run, nothing is left to do about one.
func closeQuietly(c io.Closer, log *slog.Logger) {
	if err := c.Close(); err != nil {
		log.Warn("closing the store", "err", err)
	}
}
