// Package redistest runs real Redis servers for tests: redis-server
// processes on this machine, never mocks or in-process imitations, so a
// test sees exactly what production sees: Lua, keyspace expiry, cluster
// redirects, lost connections.
//
// There are four kinds of server, by how long they live and who may break
// them:
//
//   - SharedServer(t) is the shared redis-server: one per test binary,
//     started by the first test that asks, on a unix socket, and stopped by
//     Main. Tests share its data, so each keeps to its own key prefix (or
//     calls Flush when it runs alone). It must not be killed, stopped or
//     restarted.
//   - NewServer(t) is a private redis-server on a loopback TCP port, for one
//     test, stopped by t.Cleanup. A test may Kill, Restart or Stop it to see
//     how its code takes a lost or empty server.
//   - SharedCluster(t) is the shared 3-master Redis Cluster, and NewCluster(t)
//     a private one, with the same rules as their single-server kin, except
//     that a test kills and restarts a private cluster node by node.
//     NewClusterN(t, n) is a private cluster of n masters, for benchmarks
//     of more masters than three.
//
// No server persists anything (--save "" --appendonly no): a restarted
// server starts empty.
//
// A test package that uses any of them calls Main from its TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// Main runs the tests, then stops every server the binary started and
// removes their directories. Servers never outlive the test binary: on Linux
// each redis-server is started with a parent-death signal, so it is killed
// even when the binary panics, times out or is killed; elsewhere only Main
// and t.Cleanup stop them. A binary that dies that way leaves its servers'
// directories (named rt* in $TMPDIR, a few bytes each) behind.
//
// Every function that starts a server first calls Require, which skips the
// test when redis-server or redis-cli is not installed, unless the
// environment variable CI is set, when it fails the test instead: CI must
// never pass by skipping. Debian's redis-server package provides both
// programs, and `make test` installs it when run as root.
//
// A Meter measures what servers spend in a benchmark's timed part: their
// CPU time, commands and network bytes from INFO, summed over one server
// or every master of a Cluster (Cluster.Servers), and this process's CPU
// time; Usage.Report reports them per operation (redis-µs/op,
// redis-cmds/op, redis-bytes/op, cpu-ns/op). Its own INFO commands and
// their bytes are left out; their CPU time (a fraction of a millisecond
// per Start and Stop) is not, so a benchmark measures a few thousand
// operations at least.
//
// Clients come from Server.Client and Cluster.Client, with go-redis's
// defaults, and are closed when their test ends.
//
// All functions and methods are safe for concurrent use, so tests that use
// the shared servers may call t.Parallel.
package redistest
