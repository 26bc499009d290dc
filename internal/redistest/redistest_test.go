package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestSharedServer(t *testing.T) {
	t.Parallel()
	s := redistest.SharedServer(t)
	if s2 := redistest.SharedServer(t); s2 != s {
		t.Fatal("SharedServer started a second server")
	}
	if s.Network() != "unix" {
		t.Fatalf("Network() = %q, want unix", s.Network())
	}
	ctx := context.Background()
	c := s.Client(t)
	if err := c.Set(ctx, "TestSharedServer:k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", s.URL(), err)
	}
	if opt.Network != s.Network() || opt.Addr != s.Addr() {
		t.Fatalf("URL %q parses to %s %s, want %s %s", s.URL(), opt.Network, opt.Addr, s.Network(), s.Addr())
	}
	c2 := redis.NewClient(opt)
	defer c2.Close()
	if got, err := c2.Get(ctx, "TestSharedServer:k").Result(); err != nil || got != "v" {
		t.Fatalf("GET through URL() = %q, %v; want v", got, err)
	}
}

func TestSharedServerIsNotToBreak(t *testing.T) {
	t.Parallel()
	s := redistest.SharedServer(t)
	for name, f := range map[string]func(){"Kill": s.Kill, "Stop": s.Stop} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s of the shared server did not panic", name)
				}
			}()
			f()
		}()
	}
	if err := s.Client(t).Ping(context.Background()).Err(); err != nil {
		t.Fatalf("shared server after the refused Kill and Stop: %v", err)
	}
}

func TestNewServerKillRestart(t *testing.T) {
	t.Parallel()
	s := redistest.NewServer(t)
	if s.Network() != "tcp" || s.URL() != "redis://"+s.Addr() {
		t.Fatalf("Network() = %q, URL() = %q, Addr() = %q", s.Network(), s.URL(), s.Addr())
	}
	ctx := context.Background()
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}

	addr := s.Addr()
	s.Kill()
	err := c.Get(ctx, "k").Err()
	if err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("GET from a killed server: err = %v, want a connection error", err)
	}

	s.Restart(t)
	if s.Addr() != addr {
		t.Fatalf("Restart moved the server from %s to %s", addr, s.Addr())
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart: err = %v, want redis.Nil (nothing persists)", err)
	}

	s.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Stop")
	}
	s.Restart(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Stop and Restart: %v", err)
	}
}

func TestNewServerOptions(t *testing.T) {
	t.Parallel()
	s := redistest.NewServer(t, redistest.UnixSocket(), redistest.Args("--maxmemory", "1mb"))
	if s.Network() != "unix" || s.URL() != "unix://"+s.Addr() {
		t.Fatalf("Network() = %q, URL() = %q, Addr() = %q", s.Network(), s.URL(), s.Addr())
	}
	ctx := context.Background()
	c := s.Client(t)
	got, err := c.ConfigGet(ctx, "maxmemory").Result()
	if err != nil || got["maxmemory"] != "1048576" {
		t.Fatalf("CONFIG GET maxmemory = %v, %v; want 1048576", got, err)
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	s.Flush(t)
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after Flush = %d, %v; want 0", n, err)
	}
}

// TestCluster checks that keys spread over every node of the shared
// cluster, and that a ClusterClient reaches them all.
func TestCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.SharedCluster(t)
	if cl2 := redistest.SharedCluster(t); cl2 != cl {
		t.Fatal("SharedCluster started a second cluster")
	}
	addrs := cl.Addrs()
	if len(addrs) != 3 {
		t.Fatalf("Addrs() = %v, want 3 nodes", addrs)
	}
	ctx := context.Background()
	cc := cl.Client(t)
	owners := make(map[string]int) // node address -> keys it holds
	for i := range 30 {
		k := fmt.Sprintf("TestCluster:%d", i)
		if err := cc.Set(ctx, k, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		owner := ""
		for _, a := range addrs {
			n := redis.NewClient(&redis.Options{Addr: a})
			got, err := n.Get(ctx, k).Int()
			n.Close()
			if err == nil && got == i {
				if owner != "" {
					t.Fatalf("%s is on both %s and %s", k, owner, a)
				}
				owner = a
			}
		}
		if owner == "" {
			t.Fatalf("%s is on no node", k)
		}
		owners[owner]++
		if got, err := cc.Get(ctx, k).Int(); err != nil || got != i {
			t.Fatalf("GET %s through the cluster client = %d, %v; want %d", k, got, err, i)
		}
	}
	if len(owners) != 3 {
		t.Fatalf("30 keys landed on %d nodes (%v), want all 3", len(owners), owners)
	}
}

func TestNewClusterKillRestart(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t)
	ctx := context.Background()
	k := keyOn(t, cl.Addrs()[1])
	cc := cl.Client(t)
	if err := cc.Set(ctx, k, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	cl.Kill(1)
	if err := cc.Get(ctx, k).Err(); err == nil || errors.Is(err, redis.Nil) {
		t.Fatalf("GET %s from a killed node: err = %v, want a connection error", k, err)
	}

	cl.Restart(t, 1)
	if err := cc.Get(ctx, k).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET %s after Restart: err = %v, want redis.Nil (nothing persists)", k, err)
	}
	if err := cc.Set(ctx, k, "w", 0).Err(); err != nil {
		t.Fatalf("SET %s after Restart: %v", k, err)
	}
	if got, err := cl.Client(t).Get(ctx, k).Result(); err != nil || got != "w" {
		t.Fatalf("GET %s through a new client = %q, %v; want w", k, got, err)
	}
}

// keyOn returns a key that the cluster node at addr serves: the node
// answers a plain GET of it instead of redirecting.
func keyOn(t *testing.T, addr string) string {
	n := redis.NewClient(&redis.Options{Addr: addr})
	defer n.Close()
	for i := range 1000 {
		k := fmt.Sprintf("k%d", i)
		if err := n.Get(context.Background(), k).Err(); errors.Is(err, redis.Nil) {
			return k
		}
	}
	t.Fatalf("no key of 1000 is served by %s", addr)
	return ""
}

// A paused server answers nothing until it is resumed, and then answers
// what waited; a paused server can be stopped.
func TestNewServerPauseResume(t *testing.T) {
	t.Parallel()
	s := redistest.NewServer(t)
	ctx := context.Background()
	c := s.Client(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	slow := redis.NewClient(&redis.Options{Network: s.Network(), Addr: s.Addr(), ContextTimeoutEnabled: true})
	defer slow.Close()
	if err := slow.Ping(short).Err(); err == nil {
		t.Fatal("a paused server answered PING")
	}
	done := make(chan error, 1)
	go func() { done <- c.Ping(ctx).Err() }()
	s.Resume()
	if err := <-done; err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
	s.Pause()
	s.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING answered after Stop")
	}
}

// TestNewClusterN checks that a cluster of four masters forms and shares
// the keys among all four.
func TestNewClusterN(t *testing.T) {
	t.Parallel()
	cl := redistest.NewClusterN(t, 4)
	if n := len(cl.Addrs()); n != 4 {
		t.Fatalf("NewClusterN(t, 4) has %d nodes", n)
	}
	ctx := context.Background()
	cc := cl.Client(t)
	for i := range 40 {
		if err := cc.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range cl.Servers() {
		n, err := s.Client(t).DBSize(ctx).Result()
		if err != nil || n == 0 {
			t.Errorf("master %s holds %d of 40 keys (%v), want some", s.Addr(), n, err)
		}
	}
}

// TestNewClusterReplicated checks that nodes 0 to 2 are masters and node
// 3+i is master i's replica, holding what master i holds.
func TestNewClusterReplicated(t *testing.T) {
	t.Parallel()
	cl := redistest.NewClusterReplicated(t)
	nodes := cl.Servers()
	if len(nodes) != 6 {
		t.Fatalf("NewClusterReplicated has %d nodes, want 6", len(nodes))
	}
	ctx := context.Background()
	cc := cl.Client(t)
	for i := range 40 {
		if err := cc.Set(ctx, fmt.Sprintf("k%d", i), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		m, r := nodes[i].Client(t), nodes[3+i].Client(t)
		if err := m.Do(ctx, "WAIT", 1, 2000).Err(); err != nil {
			t.Fatal(err)
		}
		role, err := r.Do(ctx, "ROLE").Slice()
		if err != nil || len(role) < 3 || role[0] != "slave" || fmt.Sprint(role[2]) != strings.TrimPrefix(nodes[i].Addr(), "127.0.0.1:") {
			t.Fatalf("node %d: ROLE = %v, %v; want a replica of node %d (%s)", 3+i, role, err, i, nodes[i].Addr())
		}
		mn, _ := m.DBSize(ctx).Result()
		rn, _ := r.DBSize(ctx).Result()
		if mn == 0 || mn != rn {
			t.Errorf("master %d holds %d keys, its replica %d", i, mn, rn)
		}
	}
}
