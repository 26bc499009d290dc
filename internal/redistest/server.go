package redistest

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process, with the address it keeps across
// restarts. Its methods are safe for concurrent use.
type Server struct {
	network string // "tcp" or "unix"
	addr    string // "127.0.0.1:PORT" or the socket's path
	dir     string // its working directory, made by mkdir
	bus     int    // cluster bus port; 0 outside a cluster
	extra   []string
	shared  bool // SharedServer's, or a node of SharedCluster

	mu sync.Mutex
	p  *proc // nil when stopped
}

// Option configures NewServer.
type Option interface{ apply(*config) }

type config struct {
	unix bool
	args []string
}

type unixOption struct{}

func (unixOption) apply(c *config) { c.unix = true }

// UnixSocket has NewServer listen on a unix socket in its own directory
// instead of a loopback TCP port.
func UnixSocket() Option { return unixOption{} }

type argsOption []string

func (o argsOption) apply(c *config) { c.args = append(c.args, o...) }

// Args passes more arguments to redis-server, after redistest's own (which
// they override): Args("--maxmemory", "1mb", "--maxmemory-policy",
// "allkeys-lru").
func Args(args ...string) Option { return argsOption(args) }

// shared holds the servers that SharedServer and SharedCluster start, once
// per test binary.
var shared struct {
	mu      sync.Mutex
	server  *Server
	cluster *Cluster
}

// SharedServer returns the test binary's shared redis-server, starting it on
// the first call: one process on a unix socket, which Main stops. Tests
// share its data, so each should use keys of its own; it must not be
// killed, stopped or restarted (Kill and Stop panic, Restart fails t).
//
// It skips or fails t as Require does, and fails t when the test package's
// TestMain does not call Main, or when redis-server does not start.
func SharedServer(t testing.TB) *Server {
	t.Helper()
	Require(t)
	requireMain(t, "SharedServer")
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server == nil {
		s, err := newServer(config{unix: true}, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.shared = true
		shared.server = s
	}
	return shared.server
}

// NewServer starts a redis-server for t alone, on a free loopback TCP port
// unless UnixSocket is given, and stops it and removes its directory when t
// ends (t.Cleanup). t may Kill, Stop and Restart it.
//
// It skips or fails t as Require does, and fails t when redis-server does
// not start, with redis-server's output in the message.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	Require(t)
	var c config
	for _, o := range opts {
		o.apply(&c)
	}
	s, err := newServer(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.discard)
	return s
}

// startTries is how many times newServer tries free ports before giving up,
// and Restart tries its port.
const startTries = 5

// newServer makes a directory and starts a redis-server in it as c says, on
// free ports picked afresh each time one turns out to be taken. buses is 1
// for a cluster node, which needs a second port for the cluster bus.
func newServer(c config, buses int) (*Server, error) {
	dir, err := mkdir()
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, extra: c.args}
	if c.unix {
		s.network, s.addr = "unix", filepath.Join(dir, "redis.sock")
		if _, err := s.start(); err != nil {
			rmdir(dir)
			return nil, err
		}
		return s, nil
	}
	for try := 1; ; try++ {
		ports, err := freePorts(1 + buses)
		if err != nil {
			rmdir(dir)
			return nil, err
		}
		s.network, s.addr = "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		if buses > 0 {
			s.bus = ports[1]
		}
		inUse, err := s.start()
		if err == nil {
			return s, nil
		}
		if !inUse || try == startTries {
			rmdir(dir)
			return nil, err
		}
	}
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago: the kernel's choices for listeners on port 0, closed again.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("redistest: finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// args returns redis-server's arguments.
func (s *Server) args() []string {
	a := []string{"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", s.dir}
	if s.network == "unix" {
		a = append(a, "--port", "0", "--unixsocket", s.addr, "--unixsocketperm", "700")
	} else {
		_, port, _ := net.SplitHostPort(s.addr)
		a = append(a, "--bind", "127.0.0.1", "--port", port)
	}
	if s.bus != 0 {
		a = append(a, "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(s.bus))
	}
	return append(a, s.extra...)
}

// start starts redis-server and waits until it answers PING. On failure it
// says whether redis-server could not bind its address, and the error
// holds redis-server's output. The caller holds s.mu or owns s alone.
func (s *Server) start() (inUse bool, err error) {
	p, err := spawn("redis-server", s.args()...)
	if err != nil {
		return false, err
	}
	if err := waitReady(p, s.network, s.addr); err != nil {
		p.kill()
		out := p.log.String()
		return strings.Contains(out, "Address already in use"),
			fmt.Errorf("redistest: redis-server on %s did not start: %w; its output:\n%s", s.addr, err, out)
	}
	s.p = p
	return false, nil
}

// Network returns "tcp" or "unix", as net.Dial and redis.Options take it.
func (s *Server) Network() string { return s.network }

// Addr returns the server's address: "127.0.0.1:PORT", or a unix socket's
// path. It stays the same across Restart.
func (s *Server) Addr() string { return s.addr }

// URL returns the server's address as redis.ParseURL takes it:
// "redis://127.0.0.1:PORT" or "unix:///path/to/socket".
func (s *Server) URL() string {
	if s.network == "unix" {
		return "unix://" + s.addr
	}
	return "redis://" + s.addr
}

// Client returns a new client of the server, closed when t ends.
func (s *Server) Client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Network: s.network, Addr: s.addr})
	t.Cleanup(func() { c.Close() })
	return c
}

// Flush deletes every key in every database of the server (FLUSHALL),
// failing t if it cannot. On SharedServer it deletes other tests' keys
// too: only a test that does not run in parallel may flush it.
func (s *Server) Flush(t testing.TB) {
	t.Helper()
	if _, err := do(s.network, s.addr, "FLUSHALL"); err != nil {
		t.Fatalf("redistest: flushing %s: %v", s.addr, err)
	}
}

// Kill kills redis-server (SIGKILL) and waits for it to exit; clients then
// get errors until Restart. It does nothing when the server is not running,
// and panics on SharedServer.
func (s *Server) Kill() {
	s.mustOwn("Kill")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.p.kill()
		s.p = nil
	}
}

// Stop shuts redis-server down (SIGTERM, then SIGKILL after 5 seconds) and
// waits for it to exit. It does nothing when the server is not running, and
// panics on SharedServer.
func (s *Server) Stop() {
	s.mustOwn("Stop")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.p.stop()
		s.p = nil
	}
}

// Pause stops redis-server in its tracks (SIGSTOP), as a stalled host or
// a long fork would: connections stay open, and nothing is read or
// answered until Resume. It does nothing when the server is not running,
// and panics on SharedServer. Kill, Stop and Restart work on a paused
// server too.
func (s *Server) Pause() { s.signal("Pause", syscall.SIGSTOP) }

// Resume lets a paused redis-server go on (SIGCONT): it answers what
// waited meanwhile. It does nothing when the server is not running, and
// panics on SharedServer.
func (s *Server) Resume() { s.signal("Resume", syscall.SIGCONT) }

func (s *Server) signal(method string, sig syscall.Signal) {
	s.mustOwn(method)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		_ = s.p.cmd.Process.Signal(sig) // fails only when p has exited already
	}
}

// Restart stops redis-server if it is running, starts it again on the same
// address, empty, and waits until it answers PING. It fails t if the server
// does not start (after a few tries when another process holds its port),
// or is SharedServer.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.shared {
		t.Fatal("redistest: Restart of a shared server: use NewServer or NewCluster for servers a test may restart")
	}
	if err := s.restart(); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.p.stop()
		s.p = nil
	}
	wait := 50 * time.Millisecond
	for try := 1; ; try++ {
		inUse, err := s.start()
		if err == nil || !inUse || try == startTries {
			return err
		}
		time.Sleep(wait) // for whoever holds the port to let it go
		wait *= 2
	}
}

// discard kills redis-server and removes its directory.
func (s *Server) discard() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p != nil {
		s.p.kill()
		s.p = nil
	}
	rmdir(s.dir)
}

func (s *Server) mustOwn(method string) {
	if s.shared {
		panic("redistest: " + method + " of a shared server: use NewServer or NewCluster for servers a test may break")
	}
}

// log returns redis-server's output, for an error message.
func (s *Server) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil {
		return "\t(not running)"
	}
	return s.p.log.String()
}
