package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// programs are the programs redistest runs; Require looks for each on PATH.
var programs = []string{"redis-server", "redis-cli"}

// lookPaths finds programs on PATH once per test binary: their paths, and
// the names of those missing.
var lookPaths = sync.OnceValues(func() (map[string]string, []string) {
	paths := make(map[string]string)
	var missing []string
	for _, name := range programs {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
			continue
		}
		paths[name] = p
	}
	return paths, missing
})

// program returns the path of the named program, found by Require.
func program(name string) string {
	paths, _ := lookPaths()
	return paths[name]
}

// Require skips t when redis-server or redis-cli is not on PATH, with a
// message that says how to install them, or fails t instead when the
// environment variable CI is non-empty. Server, NewServer, SharedCluster and
// NewCluster call it first; a test calls it itself only to skip before doing
// other work.
func Require(t testing.TB) {
	t.Helper()
	_, missing := lookPaths()
	fatal, msg := verdict(missing, os.Getenv("CI"))
	switch {
	case msg == "":
	case fatal:
		t.Fatal(msg)
	default:
		t.Skip(msg)
	}
}

// verdict decides what Require does given the missing programs and the
// value of CI: nothing (msg == ""), skip with msg, or fail with msg (fatal).
func verdict(missing []string, ci string) (fatal bool, msg string) {
	if len(missing) == 0 {
		return false, ""
	}
	msg = fmt.Sprintf("redistest: %s not found on PATH: install Debian's redis-server package "+
		"(apt-get install redis-server redis-tools), or run `make test` as root, which installs it",
		strings.Join(missing, " and "))
	if ci != "" {
		return true, msg + " (CI is set, so the Redis tests fail instead of skipping)"
	}
	return false, msg
}
