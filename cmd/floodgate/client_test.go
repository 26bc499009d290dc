package main

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/server"
)

// clientServer serves floodgate in process on a fake clock, with the
// token in the returned file.
func clientServer(t *testing.T) (url, tokenFile string) {
	t.Helper()
	return clientServerOn(t, clock.NewFake(time.Unix(t0, 0)))
}

// clientServerOn is clientServer on the clock clk.
func clientServerOn(t *testing.T, clk clock.Clock) (url, tokenFile string) {
	t.Helper()
	dir := t.TempDir()
	tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("# the token\nsesame\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := server.ParseConfig([]byte("policies: {login: sliding-log 2/10s, api: token-bucket 5/1s}\nauth: {token_file: token}\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(memstore.New(0), cfg, server.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return hs.URL, tokenFile
}

func runClientCmd(t *testing.T, args ...string) checkRun {
	t.Helper()
	t.Setenv("FLOODGATE_SERVER", "")
	t.Setenv("FLOODGATE_TOKEN", "")
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"client"}, args...), strings.NewReader(""), &stdout, &stderr)
	return checkRun{code, stdout.String(), stderr.String()}
}

func TestClientCommand(t *testing.T) {
	url, token := clientServer(t)
	flags := []string{"--server", url, "--token-file", token}
	check := func(args ...string) checkRun {
		return runClientCmd(t, append(append([]string{"check"}, flags...), args...)...)
	}
	wantRun(t, "first", check("--policy", "login", "alice"), 0, "")
	wantRun(t, "peek", check("--policy", "login", "--cost", "0", "alice"), 0, "")
	wantRun(t, "second", check("--policy", "login", "alice"), 0, "")
	wantRun(t, "third", check("--policy", "login", "alice"), 1, "10\n")
	wantRun(t, "json", check("--policy", "login", "--json", "alice"), 1, `{"allowed":false,"remaining":0,"retry_after":10,"reset_after":10}`+"\n")
	wantRun(t, "inline", check("--policy-text", "fixed-window 1/1m", "--json", "bob"), 0, `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":60}`+"\n")
	wantRun(t, "reset", runClientCmd(t, append(append([]string{"reset"}, flags...), "--policy", "login", "alice")...), 0, "")
	wantRun(t, "after the reset", check("--policy", "login", "alice"), 0, "")
	wantRun(t, "policies", runClientCmd(t, append([]string{"policies"}, flags...)...), 0, "api\ttoken-bucket 5/1s\nlogin\tsliding-log 2/10s\n")
	wantRun(t, "policies --json", runClientCmd(t, append([]string{"policies", "--json"}, flags...)...), 0,
		`[{"name":"api","policy":"token-bucket 5/1s"},{"name":"login","policy":"sliding-log 2/10s"}]`+"\n")
	// The token from the environment.
	t.Setenv("FLOODGATE_TOKEN", "sesame")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"client", "check", "--server", url, "--policy", "api", "k"}, nil, &stdout, &stderr); code != 0 {
		t.Errorf("with $FLOODGATE_TOKEN: %d %s", code, &stderr)
	}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no subcommand", nil, "want a subcommand"},
		{"unknown subcommand", []string{"chek"}, `unknown subcommand "chek"`},
		{"no key", append([]string{"check", "--policy", "login"}, flags...), "exactly one KEY"},
		{"no policy", append([]string{"check"}, append(flags, "k")...), "give --policy NAME or --policy-text"},
		{"negative cost", append([]string{"check", "--policy", "login", "--cost", "-1"}, append(flags, "k")...), "cannot be negative"},
		{"bad server URL", []string{"check", "--server", "localhost:8080", "--policy", "login", "k"}, "want http://HOST:PORT"},
		{"unknown policy", append([]string{"check", "--policy", "nope"}, append(flags, "k")...), `400 Bad Request: unknown policy "nope"`},
		{"no token", []string{"check", "--server", url, "--policy", "login", "k"}, "401 Unauthorized"},
		{"no server", []string{"check", "--server", "http://127.0.0.1:1", "--policy", "login", "k"}, "connection refused"},
		{"missing token file", []string{"check", "--token-file", "/nonexistent", "--policy", "login", "k"}, "--token-file"},
	} {
		r := runClientCmd(t, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 and %q", c.name, r.code, r.stdout, r.stderr, c.want)
		}
	}
	if r := runClientCmd(t, "-h"); r.code != 0 || r.stdout != clientUsage {
		t.Errorf("client -h: %d %q", r.code, r.stderr)
	}
}

// --max-wait takes a place in the queue and sleeps the delay on the
// clock, then exits 0; past the maximum it exits 1 at once. The server
// and the command share the fake clock.
func TestClientMaxWait(t *testing.T) {
	fake := clock.NewFake(time.Unix(t0, 0))
	defer func(c clock.Clock) { wallClock = c }(wallClock)
	wallClock = fake
	url, token := clientServerOn(t, fake)
	check := func(args ...string) checkRun {
		args = append([]string{"check", "--server", url, "--token-file", token, "--policy-text", "token-bucket 1/1s"}, args...)
		return runClientCmd(t, append(args, "k")...)
	}
	background := func(args ...string) chan checkRun {
		done := make(chan checkRun, 1)
		go func() { done <- check(args...) }()
		return done
	}
	wantRun(t, "first", check("--max-wait", "3s"), 0, "")
	second := background("--max-wait", "3s")
	fake.WaitTimers(1) // it sleeps its 1s
	wantRun(t, "past --max-wait", check("--max-wait", "1s", "--json"), 1,
		`{"allowed":false,"remaining":0,"retry_after":2,"reset_after":2,"delay":0}`+"\n")
	wantRun(t, "without --max-wait", check(), 1, "2\n")
	fake.Advance(time.Second)
	wantRun(t, "second, after its delay", <-second, 0, "")
	third := background("--max-wait", "3s", "--json")
	fake.WaitTimers(1)
	fake.Advance(time.Second)
	wantRun(t, "third", <-third, 0, `{"allowed":true,"remaining":0,"retry_after":0,"reset_after":2,"delay":1}`+"\n")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-wait", "-1s"}, "--max-wait -1s: a wait cannot be negative"},
		{[]string{"--max-wait", "soon"}, `--max-wait: "soon" is not a duration`},
	} {
		if r := check(c.args...); r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if r := runClientCmd(t, "reset", "--server", url, "--max-wait", "1s", "--policy", "api", "k"); r.code != exitUsage || !strings.Contains(r.stderr, "--max-wait goes with check") {
		t.Errorf("reset --max-wait: exit %d, stderr %q", r.code, r.stderr)
	}
}
