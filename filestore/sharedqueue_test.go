package filestore_test

import (
	"path/filepath"
	"testing"

	"github.com/floodgate/floodgate/storetest"
)

// Two stores on one file, as two processes would open it, keep one queue
// for Limiter.Delay: storetest's SharedQueue.
func TestSharedQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	storetest.SharedQueue(t, openStore(t, path), openStore(t, path))
}
