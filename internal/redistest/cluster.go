package redistest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterTimeout bounds how long a cluster has to be formed, or to be whole
// again after Restart: a master that was away longer than the node timeout
// (2 s) is marked failed, and the others take up to twice that to forgive
// it.
const clusterTimeout = 30 * time.Second

// Cluster is a Redis Cluster of masters, three unless NewClusterN says
// otherwise, each a redis-server on loopback TCP ports, that together
// serve all 16384 hash slots; without replicas, but for
// NewClusterReplicated's. Its methods are safe for concurrent use.
type Cluster struct {
	nodes   []*Server
	masters int // nodes[:masters] were made masters; nodes[masters+i] replicates nodes[i]
	shared  bool
}

// SharedCluster returns the test binary's shared cluster, starting it on the
// first call; Main stops it. The rules of SharedServer apply: tests share
// its data, and it must not be killed, stopped or restarted.
func SharedCluster(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	requireMain(t, "SharedCluster")
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster == nil {
		c, err := newCluster(3, 0)
		if err != nil {
			t.Fatal(err)
		}
		c.shared = true
		for _, n := range c.nodes {
			n.shared = true
		}
		shared.cluster = c
	}
	return shared.cluster
}

// NewCluster starts a cluster for t alone and stops it and removes its
// directories when t ends (t.Cleanup). t may Kill and Restart its nodes.
// It skips or fails t as Require does, and fails t when the cluster does
// not form.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	return NewClusterN(t, 3)
}

// NewClusterN is NewCluster of n masters, n at least 3 (redis-cli's least),
// with the 16384 slots shared out evenly. Each master is a redis-server of
// its own: a benchmark measures masters at scale with it, a test keeps to
// NewCluster.
func NewClusterN(t testing.TB, n int) *Cluster {
	t.Helper()
	Require(t)
	c, err := newCluster(n, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.discard)
	return c
}

// NewClusterReplicated is NewCluster of three masters, nodes 0 to 2, each
// with one replica: node 3+i replicates master i, in sync when it returns,
// and takes over its slots (a failover) about the node timeout (2 s) after
// master i dies. The nodes' roles then change, not their numbers.
func NewClusterReplicated(t testing.TB) *Cluster {
	t.Helper()
	Require(t)
	c, err := newCluster(minMasters, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.discard)
	return c
}

// minMasters is the fewest masters redis-cli --cluster create accepts.
const minMasters = 3

// newCluster starts n cluster-enabled masters and replicas of each,
// joins them with redis-cli --cluster create, and waits until every node
// serves and every replica is in sync.
func newCluster(n, replicas int) (*Cluster, error) {
	if n < minMasters {
		return nil, fmt.Errorf("redistest: a cluster of %d masters: Redis Cluster needs at least %d", n, minMasters)
	}
	c := &Cluster{masters: n}
	for range n * (1 + replicas) {
		n, err := newServer(config{}, 1)
		if err != nil {
			c.discard()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	p, err := spawn("redis-cli", args...)
	if err != nil {
		c.discard()
		return nil, err
	}
	select {
	case <-p.done:
	case <-time.After(clusterTimeout):
		p.kill()
	}
	if p.err != nil {
		c.discard()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create %s: %v; its output:\n%s",
			strings.Join(c.Addrs(), " "), p.err, p.log)
	}
	if err := c.waitOK(); err != nil {
		c.discard()
		return nil, err
	}
	if replicas > 0 {
		if err := c.orderReplicas(); err != nil {
			c.discard()
			return nil, err
		}
	}
	return c, nil
}

// orderReplicas puts the masters first in c.nodes and each one's replica
// at its index plus c.masters, once every replica says its link to its
// master is up (redis-cli --cluster create picks the roles itself).
func (c *Cluster) orderReplicas() error {
	deadline := time.Now().Add(clusterTimeout)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		ordered, err := c.byRole()
		if err == nil {
			c.nodes = ordered
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: replicas of %s not in sync after %v: %w", strings.Join(c.Addrs(), " "), clusterTimeout, err)
		}
		time.Sleep(wait)
	}
}

// byRole returns the nodes ordered as orderReplicas says, or why not yet.
func (c *Cluster) byRole() ([]*Server, error) {
	var masters, replicas []*Server
	of := map[string]string{} // replica's address -> its master's port
	for _, n := range c.nodes {
		info, err := do(n.network, n.addr, "INFO", "replication")
		if err != nil {
			return nil, err
		}
		if strings.Contains(info, "role:master\r\n") {
			masters = append(masters, n)
			continue
		}
		if !strings.Contains(info, "master_link_status:up\r\n") {
			return nil, fmt.Errorf("%s: replica not in sync:\n%s", n.addr, info)
		}
		_, port, _ := strings.Cut(info, "master_port:")
		port, _, _ = strings.Cut(port, "\r\n")
		of[n.addr] = port
		replicas = append(replicas, n)
	}
	if len(masters) != c.masters {
		return nil, fmt.Errorf("%d masters, want %d", len(masters), c.masters)
	}
	ordered := slices.Clone(masters)
	for _, m := range masters {
		i := slices.IndexFunc(replicas, func(r *Server) bool { return strings.HasSuffix(m.addr, ":"+of[r.addr]) })
		if i < 0 {
			return nil, fmt.Errorf("%s: no replica", m.addr)
		}
		ordered = append(ordered, replicas[i])
	}
	return ordered, nil
}

// waitOK polls CLUSTER INFO on every node, with a backoff from 10 ms to
// 200 ms, until each says the cluster is ok, knows every node and sees all
// slots assigned, or clusterTimeout passes.
func (c *Cluster) waitOK() error {
	deadline := time.Now().Add(clusterTimeout)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		n, err := c.notOK()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: cluster %s not ok after %v: %w; the output of %s:\n%s",
				strings.Join(c.Addrs(), " "), clusterTimeout, err, n.addr, n.log())
		}
		time.Sleep(wait)
	}
}

// notOK returns a node whose CLUSTER INFO shows it not serving, and why.
func (c *Cluster) notOK() (*Server, error) {
	want := []string{
		"cluster_state:ok",
		"cluster_slots_assigned:16384",
		"cluster_known_nodes:" + strconv.Itoa(len(c.nodes)),
	}
	for _, n := range c.nodes {
		info, err := do(n.network, n.addr, "CLUSTER", "INFO")
		if err != nil {
			return n, err
		}
		for _, w := range want {
			if !strings.Contains(info, w+"\r\n") {
				return n, fmt.Errorf("%s: CLUSTER INFO lacks %s:\n%s", n.addr, w, info)
			}
		}
	}
	return nil, nil
}

// Addrs returns the nodes' addresses, "127.0.0.1:PORT", in the order Kill
// and Restart number them. They stay the same across Restart.
func (c *Cluster) Addrs() []string {
	a := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		a[i] = n.addr
	}
	return a
}

// Servers returns the nodes, in the order of Addrs: for a Meter of the
// whole cluster. The nodes of SharedCluster must not be
// killed, stopped or restarted (their Kill and Stop panic).
func (c *Cluster) Servers() []*Server { return slices.Clone(c.nodes) }

// Client returns a new cluster client of the cluster, closed when t ends.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Kill kills node i (SIGKILL) and waits for it to exit: the keys in its
// slots become unreachable. It panics on SharedCluster.
func (c *Cluster) Kill(i int) {
	c.mustOwn("Kill")
	c.nodes[i].Kill()
}

// Pause stops node i (SIGSTOP) until Resume: the calls to its slots
// stall, as on a host that freezes. Resume it within the node timeout
// (2 s), or the others mark it failed. It panics on SharedCluster.
func (c *Cluster) Pause(i int) {
	c.mustOwn("Pause")
	c.nodes[i].Pause()
}

// Resume resumes node i after Pause (SIGCONT). It panics on
// SharedCluster.
func (c *Cluster) Resume(i int) {
	c.mustOwn("Resume")
	c.nodes[i].Resume()
}

// Restart restarts node i on the same ports with its cluster configuration
// kept, so it serves the same slots again, empty, and waits until every
// node says the cluster is ok, which takes a few seconds after a Kill that
// lasted longer than the node timeout (2 s). It fails t if the node does
// not start or the cluster does not recover, or on SharedCluster.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	if c.shared {
		t.Fatal("redistest: Restart of SharedCluster: use NewCluster for a cluster a test may break")
	}
	if err := c.nodes[i].restart(); err != nil {
		t.Fatal(err)
	}
	if err := c.waitOK(); err != nil {
		t.Fatal(err)
	}
}

// discard kills every node and removes their directories.
func (c *Cluster) discard() {
	for _, n := range c.nodes {
		n.discard()
	}
}

func (c *Cluster) mustOwn(method string) {
	if c.shared {
		panic("redistest: " + method + " of SharedCluster: use NewCluster for a cluster a test may break")
	}
}
