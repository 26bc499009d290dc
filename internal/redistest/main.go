package redistest

import (
	"sync/atomic"
	"testing"
)

// inMain is set while Main runs the tests.
var inMain atomic.Bool

// Main runs the tests of m, then kills every redis-server the test binary
// started and removes their directories. (A test that panics still runs
// its cleanups, which stop its private servers; the panic then ends the
// binary before Main returns, and on Linux the shared servers die with it.)
// A test package that uses SharedServer or
// SharedCluster must call it from TestMain; one that uses only NewServer
// and NewCluster should, so that nothing a test leaks outlives the binary.
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// Main returns once the servers are gone; when TestMain then returns, the
// testing package exits with m.Run's result.
func Main(m *testing.M) {
	inMain.Store(true)
	defer func() {
		inMain.Store(false)
		shared.mu.Lock()
		shared.server, shared.cluster = nil, nil
		shared.mu.Unlock()
		cleanup()
	}()
	m.Run()
}

// requireMain fails t when Main is not running the tests: without it, a
// shared server's directory would outlive the test binary.
func requireMain(t testing.TB, fn string) {
	t.Helper()
	if !inMain.Load() {
		t.Fatalf("redistest: %s needs redistest.Main: add func TestMain(m *testing.M) { redistest.Main(m) } to the test package", fn)
	}
}
