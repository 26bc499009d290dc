//go:build !linux

package filestore_test

import (
	"testing"

	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/store"
)

func childDiskFull(t *testing.T, _ *filestore.Store, _ store.Table) {
	t.Skip("RLIMIT_FSIZE stands in for a full disk on Linux only")
}
