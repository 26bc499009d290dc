package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// floodgate check counts bytes: a 10 Gbit/s link's 1.25*10^9 bytes per
// second with bursts of 4 GiB, on the file store, exact to the
// nanosecond (it prints waits in whole seconds, rounded up); a LIMIT past 10^15 is a usage error that says why.
func TestCheckBytes(t *testing.T) {
	policy := "token-bucket 1250000000/1s burst=4294967296"
	store := "--store=file:" + filepath.Join(t.TempDir(), "state.db")
	for _, tt := range []struct {
		at     time.Duration
		cost   string
		code   int
		stdout string
	}{
		{0, "4294967296", 0, ""},
		{0, "1500", 1, "1\n"}, // whole seconds, rounded up: 1.2µs,
		{time.Second, "1250000000", 0, ""},
		{time.Second, "1", 1, "1\n"}, // 1ns,
		{5 * time.Second, "3000000000", 0, ""},
		{5 * time.Second, "3000000000", 1, "2\n"}, // 1.364026164s,
	} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"check", store, at(tt.at), "--policy", policy, "--cost", tt.cost, "link"}, strings.NewReader(""), &stdout, &stderr)
		if code != tt.code || stdout.String() != tt.stdout {
			t.Errorf("at %v cost %s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q", tt.at, tt.cost, code, &stdout, &stderr, tt.code, tt.stdout)
		}
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"check", "--policy", "token-bucket 1000000000000001/1s", "k"}, strings.NewReader(""), &stdout, &stderr)
	if want := "limit 1000000000000001 is more than 1000000000000000"; code != exitUsage || !strings.Contains(stderr.String(), want) {
		t.Errorf("a LIMIT past 10^15: exit %d, stderr %q; want exit 2 and %q", code, &stderr, want)
	}
}
