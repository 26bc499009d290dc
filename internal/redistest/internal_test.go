package redistest

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		missing []string
		ci      string
		fatal   bool
		skip    bool
	}{
		{"installed", nil, "", false, false},
		{"installed under CI", nil, "true", false, false},
		{"missing", []string{"redis-server", "redis-cli"}, "", false, true},
		{"missing redis-cli", []string{"redis-cli"}, "", false, true},
		{"missing under CI", []string{"redis-server"}, "1", true, false},
		{"missing under CI=true", []string{"redis-server"}, "true", true, false},
		{"missing under CI=false", []string{"redis-server"}, "false", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fatal, msg := verdict(tc.missing, tc.ci)
			if fatal != tc.fatal || (msg != "") != (tc.fatal || tc.skip) {
				t.Fatalf("verdict(%q, %q) = %v, %q", tc.missing, tc.ci, fatal, msg)
			}
			if msg == "" {
				return
			}
			for _, want := range append([]string{"redis-server package", "make test"}, tc.missing...) {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not mention %q", msg, want)
				}
			}
		})
	}
}

// TestCleanup checks that a private server is gone, process and directory,
// once its test ends.
func TestCleanup(t *testing.T) {
	var pid int
	var dir string
	t.Run("server", func(t *testing.T) {
		s := NewServer(t)
		pid, dir = s.p.cmd.Process.Pid, s.dir
	})
	if pid == 0 {
		t.Skip("no server started")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("redis-server %d after its test: kill -0 says %v, want ESRCH", pid, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after its test: stat says %v, want not found", dir, err)
	}
}

// TestStartFailure checks that a server that does not start says why, with
// redis-server's own words.
func TestStartFailure(t *testing.T) {
	Require(t)
	dirs := func() int {
		live.mu.Lock()
		defer live.mu.Unlock()
		return len(live.dirs)
	}
	before := dirs()
	_, err := newServer(config{args: []string{"--no-such-directive", "1"}}, 0)
	if err == nil {
		t.Fatal("redis-server started with a bad directive")
	}
	if !strings.Contains(err.Error(), "no-such-directive") {
		t.Fatalf("error lacks redis-server's output: %v", err)
	}
	if after := dirs(); after != before {
		t.Fatalf("a failed start left %d directories behind", after-before)
	}
}

// TestClusterTooFew checks that a cluster of fewer masters than Redis
// Cluster takes is refused, with a reason, before any server starts.
func TestClusterTooFew(t *testing.T) {
	c, err := newCluster(2, 0)
	if err == nil {
		c.discard()
		t.Fatal("newCluster(2) formed a cluster")
	}
	if !strings.Contains(err.Error(), "at least 3") {
		t.Fatalf("newCluster(2): %v, want a reason that names the least", err)
	}
}
