//go:build !linux

package filestore_test

import (
	"testing"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/filestore"
)

func childDiskFull(t *testing.T, _ *filestore.Store, _ floodgate.Table) {
	t.Skip("RLIMIT_FSIZE stands in for a full disk on Linux only")
}
