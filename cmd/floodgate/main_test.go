package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		code       int
		stdout     string
		stderrPart string
	}{
		{"no arguments", nil, exitUsage, "", "Usage: floodgate COMMAND"},
		{"unknown command", []string{"simulat"}, exitUsage, "", "floodgate: unknown command \"simulat\"\n\nUsage: floodgate COMMAND"},
		{"help", []string{"help"}, exitOK, usage(), ""},
		{"-h", []string{"-h"}, exitOK, usage(), ""},
		{"--help", []string{"--help"}, exitOK, usage(), ""},
		{"help with a command", []string{"help", "simulate"}, exitOK, simulateUsage, ""},
		{"help with an unknown command", []string{"help", "nope"}, exitUsage, "", `unknown command "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != tt.code || stdout.String() != tt.stdout || !strings.Contains(stderr.String(), tt.stderrPart) ||
				tt.stderrPart == "" && stderr.Len() > 0 {
				t.Errorf("run(%q) = %d\nstdout:\n%s\nstderr:\n%s\nwant %d, stdout %q, stderr containing %q",
					tt.args, code, &stdout, &stderr, tt.code, tt.stdout, tt.stderrPart)
			}
		})
	}
}

func TestUsageListsCommands(t *testing.T) {
	const want = `Usage: floodgate COMMAND [ARGUMENTS]

Commands:
  simulate   replay a trace through a policy with simulated time

Run 'floodgate COMMAND -h' for a command's usage.
`
	if got := usage(); got != want {
		t.Errorf("usage() =\n%s\nwant\n%s", got, want)
	}
}
