package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// An error that a setting from the environment caused names the variable,
// not the flag the user never gave; a store's password stays hidden.
func TestErrorsNameTheVariable(t *testing.T) {
	bin := floodgateBinary(t)
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"FLOODGATE_STORE=bogus:x"}, []string{"check", "--policy", "fixed-window 1/1m", "k"}, "$FLOODGATE_STORE: invalid store URL"},
		{[]string{"FLOODGATE_SERVER=ftp://x"}, []string{"client", "policies"}, "$FLOODGATE_SERVER: client: server URL"},
		{[]string{"FLOODGATE_STORE=bogus:x"}, []string{"serve", "--snapshot", "off", "--http", "127.0.0.1:0", "--metrics", "off"},
			"settings from the environment: FLOODGATE_STORE=bogus:x"},
		{[]string{"FLOODGATE_HTTP=256.1.1.1:1", "FLOODGATE_STORE=redis://app:s3cret@127.0.0.1:1"}, []string{"serve", "--snapshot", "off", "--metrics", "off"},
			"settings from the environment: FLOODGATE_HTTP=256.1.1.1:1 FLOODGATE_STORE=redis://app:xxxxx@127.0.0.1:1"},
		{[]string{"FLOODGATE_SNAPSHOT_INTERVAL=soon"}, []string{"serve"}, "$FLOODGATE_SNAPSHOT_INTERVAL: "},
	} {
		cmd := exec.Command(bin, c.args...)
		cmd.Env = append(os.Environ(), "FLOODGATE_TOKEN=")
		cmd.Env = append(cmd.Env, c.env...)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "s3cret") {
			t.Errorf("%s floodgate %s: %v\n%s\nwant a failure saying %q", strings.Join(c.env, " "), c.args[0], err, out, c.want)
		}
	}
}

// A FLOODGATE_* variable floodgate does not read is warned about, once,
// with the closest one it reads; the command runs on.
func TestUnknownVariablesWarned(t *testing.T) {
	t.Setenv("FLOODGATE_STOR", "memory")
	t.Setenv("FLOODGATE_BOGUS", "1")
	t.Setenv("FLOODGATE_TOKEN", "") // read, so never warned about
	var stdout, stderr strings.Builder
	if code := run([]string{"version"}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("floodgate version = %d, want %d", code, exitOK)
	}
	want := "floodgate: warning: $FLOODGATE_BOGUS is not a floodgate setting and is ignored ('floodgate serve -h' lists them)\n" +
		"floodgate: warning: $FLOODGATE_STOR is not a floodgate setting and is ignored; did you mean $FLOODGATE_STORE?\n"
	if stderr.String() != want {
		t.Errorf("standard error:\n%s\nwant:\n%s", stderr.String(), want)
	}
}
