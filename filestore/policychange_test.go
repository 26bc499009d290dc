package filestore_test

import (
	"path/filepath"
	"testing"

	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storetest"
)

// TestPolicyChange: a limiter that keeps its name and changes its policy
// keeps each key's spent units in the file, across a restart (the file
// closed and opened again).
func TestPolicyChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	before, err := filestore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	storetest.PolicyChange(t, before, func(t *testing.T, _ int64) store.Store {
		if err := before.Close(); err != nil {
			t.Fatal(err)
		}
		return openStore(t, path)
	})
}
