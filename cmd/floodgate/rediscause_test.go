package main

import (
	"strings"
	"testing"
)

// On a Redis that refuses connections, check prints no raw go-redis line
// and names the cause, not only the timeout.
func TestCheckNamesWhyRedisIsUnreachable(t *testing.T) {
	r := runBinary(t, nil, "check", "--policy", "token-bucket 1/1s", "--store", "redis://127.0.0.1:1", "k")
	if r.code != exitUsage || strings.Contains(r.stderr, "pool.go") || !strings.HasPrefix(r.stderr, "floodgate check: cannot reach Redis: dial tcp 127.0.0.1:1: connect: connection refused (") {
		t.Errorf("check on a closed port: exit %d, stderr:\n%s\nwant 2 and one line starting with the cause, connection refused, which go-redis logs (has its message changed?)", r.code, r.stderr)
	}
}

// go-redis logs a failed dial with the dial's error, which withRedisCause
// finds from "dial " on.
func TestRedisCauseTake(t *testing.T) {
	var h causeHandler
	h.last = "redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:1: connect: connection refused"
	if got, want := h.take(), "dial tcp 127.0.0.1:1: connect: connection refused"; got != want {
		t.Errorf("take() = %q, want %q", got, want)
	}
	if got := h.take(); got != "" {
		t.Errorf("a second take() = %q, want \"\"", got)
	}
}
