package server

import (
	"cmp"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/store"
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

// openStore opens the store of url: the memory store itself, or another
// wrapped in a FailsafeStore with the configuration's failure mode (and
// its local store, for FailLocal). close closes it.
func openStore(url string, cfg *Config, log *slog.Logger) (store store.Store, mem, local *floodgate.MemoryStore, close func(), err error) {
	if url == "" || url == "memory" || url == "memory:" {
		mem = floodgate.NewMemoryStore(cfg.Store.MaxKeys)
		return mem, mem, nil, func() {}, nil
	}
	s, closer, err := storeurl.Open(url)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("--store: %w", err)
	}
	mode, _ := cfg.failMode()
	timeout := DefaultStoreTimeout
	if strings.HasPrefix(url, "file:") {
		timeout = DefaultFileStoreTimeout // a transaction waits for the disk (fsync) and for other processes
	}
	fo := floodgate.FailsafeOptions{Mode: mode, Timeout: cmp.Or(cfg.Store.Timeout, timeout), Logger: log.With("store", storeName(url))}
	if mode == floodgate.FailLocal {
		local = floodgate.NewMemoryStore(cfg.Store.MaxKeys)
		fo.Local = local
	}
	return floodgate.Failsafe(s, fo), nil, local, func() { closeQuietly(closer, log) }, nil
}

func closeQuietly(c io.Closer, log *slog.Logger) {
	if err := c.Close(); err != nil {
		log.Warn("closing the store", "err", err)
	}
}
