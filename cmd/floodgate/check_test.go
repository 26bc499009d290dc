package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/redistest"
	"go.etcd.io/bbolt"
)

// t0 is the tests' start of time, as --now takes it.
const t0 = 1795305600 // 2026-11-22T00:00:00Z

// checkRun is one run of the floodgate binary: its exit status and output.
type checkRun struct {
	code           int
	stdout, stderr string
}

// runBinary runs the built floodgate command with args and env added to
// the test's environment.
func runBinary(t *testing.T, env []string, args ...string) checkRun {
	t.Helper()
	cmd := exec.Command(floodgateBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("floodgate %q: %v", args, err)
	}
	return checkRun{cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()}
}

// at is --now at t0 + d.
func at(d time.Duration) string {
	return "--now=" + strconv.FormatFloat(float64(t0)+d.Seconds(), 'f', -1, 64)
}

func wantRun(t *testing.T, what string, got checkRun, code int, stdout string) {
	t.Helper()
	if got.code != code || got.stdout != stdout {
		t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, stdout %q", what, got.code, got.stdout, got.stderr, code, stdout)
	}
}

// The SMS guard of seed 000: twenty messages at once, then one an hour.
func TestCheckSMSGuard(t *testing.T) {
	store := "--store=file:" + filepath.Join(t.TempDir(), "state.db")
	sms := func(d time.Duration) checkRun {
		return runBinary(t, nil, "check", store, at(d), "--policy", "leaky-bucket 1/1h capacity=20", "sms")
	}
	for i := range 20 {
		wantRun(t, fmt.Sprint("message ", i+1), sms(time.Duration(i)*time.Second), 0, "")
	}
	wantRun(t, "message 21", sms(20*time.Second), 1, "3580\n") // the first drop leaks at 1h
	wantRun(t, "after 30 minutes", sms(30*time.Minute), 1, "1800\n")
	wantRun(t, "after an hour", sms(time.Hour), 0, "")
	wantRun(t, "then", sms(time.Hour+time.Second), 1, "3599\n")
}

// The CGI guard of seed 001: five requests a minute per address, and at
// most eight a minute from all addresses together, all or nothing.
func TestCheckCGIGuard(t *testing.T) {
	store := "--store=file:" + filepath.Join(t.TempDir(), "state.db")
	cgi := func(d time.Duration, addr string) checkRun {
		return runBinary(t, nil, "check", store, at(d),
			"--limit", "cgi:"+addr+"=sliding-log 5/1m", "--limit", "cgi=sliding-log 8/1m")
	}
	for i := range 5 {
		wantRun(t, fmt.Sprint("request ", i+1), cgi(time.Duration(i)*time.Second, "203.0.113.9"), 0, "")
	}
	wantRun(t, "sixth request", cgi(10*time.Second, "203.0.113.9"), 1, "50\n")
	// The refusal spent nothing of the global limit: three more from
	// elsewhere pass, the fourth meets the global limit.
	for i := range 3 {
		wantRun(t, fmt.Sprint("other ", i+1), cgi(11*time.Second, "198.51.100.7"), 0, "")
	}
	wantRun(t, "global limit", cgi(12*time.Second, "198.51.100.8"), 1, "48\n")
	wantRun(t, "a minute later", cgi(60*time.Second, "203.0.113.9"), 0, "")
}

// Thirty processes at once on one file and one key admit exactly the
// policy's twenty.
func TestCheckConcurrentProcesses(t *testing.T) {
	store := "--store=file:" + filepath.Join(t.TempDir(), "state.db")
	bin := floodgateBinary(t)
	const procs = 30
	runs := make([]checkRun, procs)
	var wg sync.WaitGroup
	for i := range procs {
		wg.Go(func() {
			cmd := exec.Command(bin, "check", store, at(0), "--policy", "leaky-bucket 1/1h capacity=20", "sms")
			out, _ := cmd.Output()
			runs[i] = checkRun{code: cmd.ProcessState.ExitCode(), stdout: string(out)}
		})
	}
	wg.Wait()
	admitted := 0
	for i, r := range runs {
		switch {
		case r.code == 0 && r.stdout == "":
			admitted++
		case r.code == 1 && r.stdout == "3600\n":
		default:
			t.Errorf("process %d: exit %d, stdout %q", i, r.code, r.stdout)
		}
	}
	if admitted != 20 {
		t.Errorf("%d of %d processes admitted, want exactly 20", admitted, procs)
	}
}

// Processes killed with SIGKILL at random moments, some in the middle of a
// decision, leave a file that the next check opens and decides from: its
// state counts every admission reported and at most one more per kill.
func TestCheckKilledProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	bin := floodgateBinary(t)
	r := rand.New(rand.NewPCG(5, 6))
	const procs = 24
	var admitted, killed int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range procs {
		cmd := exec.Command(bin, "check", "--store=file:"+path, at(0), "--policy", "fixed-window 1000/1h", "k")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(r.IntN(8000)) * time.Microsecond
		kill := i%2 == 0
		wg.Go(func() {
			if kill {
				time.Sleep(delay) // a random moment in the process's life, not simulated time
				cmd.Process.Signal(syscall.SIGKILL)
			}
			err := cmd.Wait()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted++
			case cmd.ProcessState.Sys().(syscall.WaitStatus).Signaled():
				killed++
			default:
				t.Errorf("check: %v", err)
			}
		})
	}
	wg.Wait()
	got := runBinary(t, nil, "check", "--store=file:"+path, at(time.Second), "--json", "--cost", "0", "--policy", "fixed-window 1000/1h", "k")
	var out struct {
		Limits []struct{ Remaining int }
	}
	if err := json.Unmarshal([]byte(got.stdout), &out); err != nil || got.code != 0 || len(out.Limits) != 1 {
		t.Fatalf("after the kills: exit %d, stdout %q, stderr %q (%v)", got.code, got.stdout, got.stderr, err)
	}
	used := 1000 - out.Limits[0].Remaining
	if used < admitted || used > admitted+killed {
		t.Errorf("the file counts %d events; %d were reported admitted and %d processes killed", used, admitted, killed)
	}
	t.Logf("%d admitted, %d killed, %d counted", admitted, killed, used)
}

// With no --store and no $FLOODGATE_STORE, check keeps its state in
// $XDG_STATE_HOME/floodgate/state.db, shared by every run; $FLOODGATE_STORE
// chooses another store.
func TestCheckDefaultStore(t *testing.T) {
	state := t.TempDir()
	env := []string{"XDG_STATE_HOME=" + state, "FLOODGATE_STORE="}
	wantRun(t, "first", runBinary(t, env, "check", at(0), "--policy", "fixed-window 1/1m", "k"), 0, "")
	wantRun(t, "second", runBinary(t, env, "check", at(0), "--policy", "fixed-window 1/1m", "k"), 1, "60\n")
	if _, err := os.Stat(filepath.Join(state, "floodgate", "state.db")); err != nil {
		t.Errorf("the state file: %v", err)
	}
	other := []string{"XDG_STATE_HOME=" + state, "FLOODGATE_STORE=file:" + filepath.Join(t.TempDir(), "other.db")}
	wantRun(t, "another store", runBinary(t, other, "check", at(0), "--policy", "fixed-window 1/1m", "k"), 0, "")
}

// On Redis, --now decides at the time given, not on Redis's clock.
func TestCheckRedisAtGivenTime(t *testing.T) {
	srv := redistest.SharedServer(t)
	store := "--store=" + srv.URL()
	key := fmt.Sprintf("check-%d", rand.Uint64())
	wantRun(t, "first", runBinary(t, nil, "check", store, at(0), "--policy", "token-bucket 1/1h", key), 0, "")
	wantRun(t, "second", runBinary(t, nil, "check", store, at(time.Second), "--policy", "token-bucket 1/1h", key), 1, "3599\n")
	wantRun(t, "an hour later", runBinary(t, nil, "check", store, at(time.Hour), "--policy", "token-bucket 1/1h", key), 0, "")
}

func TestCheckJSON(t *testing.T) {
	store := "--store=file:" + filepath.Join(t.TempDir(), "state.db")
	args := []string{"check", store, "--json", at(0), "--limit", "u=1=token-bucket 2/1m", "--limit", "all=fixed-window 3/1m"}
	var stdout, stderr bytes.Buffer
	for _, want := range []string{
		`{"allowed":true,"retry_after":0,"limits":[{"key":"u=1","policy":"token-bucket 2/1m","allowed":true,"remaining":1,"retry_after":0,"reset_after":30},{"key":"all","policy":"fixed-window 3/1m","allowed":true,"remaining":2,"retry_after":0,"reset_after":60}]}`,
		`{"allowed":true,"retry_after":0,"limits":[{"key":"u=1","policy":"token-bucket 2/1m","allowed":true,"remaining":0,"retry_after":0,"reset_after":60},{"key":"all","policy":"fixed-window 3/1m","allowed":true,"remaining":1,"retry_after":0,"reset_after":60}]}`,
		`{"allowed":false,"retry_after":30,"limits":[{"key":"u=1","policy":"token-bucket 2/1m","allowed":false,"remaining":0,"retry_after":30,"reset_after":60},{"key":"all","policy":"fixed-window 3/1m","allowed":true,"remaining":0,"retry_after":0,"reset_after":60}]}`,
	} {
		stdout.Reset()
		code := run(args, strings.NewReader(""), &stdout, &stderr)
		if got := strings.TrimSuffix(stdout.String(), "\n"); got != want || code != map[bool]int{true: 0, false: 1}[strings.HasPrefix(want, `{"allowed":true`)] {
			t.Errorf("exit %d, stdout\n%s\nwant\n%s\n(stderr %s)", code, got, want, &stderr)
		}
	}
}

// --wait sleeps until the check is admitted, on the clock; --max-wait
// gives up at once when the wait would be longer.
func TestCheckWait(t *testing.T) {
	fake := clock.NewFake(time.Unix(t0, 0))
	defer func(c clock.Clock) { wallClock = c }(wallClock)
	wallClock = fake
	store := "--store=file:" + filepath.Join(t.TempDir(), "state.db")
	check := func(extra ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"check", store, "--policy", "token-bucket 1/10s"}, append(extra, "k")...),
			strings.NewReader(""), &stdout, &stderr)
		if stderr.Len() > 0 {
			t.Errorf("stderr: %s", &stderr)
		}
		return code, stdout.String()
	}
	if code, out := check(); code != 0 || out != "" {
		t.Fatalf("first: exit %d, %q", code, out)
	}
	if code, out := check("--wait", "--max-wait", "9s"); code != 1 || out != "10\n" {
		t.Errorf("--max-wait 9s: exit %d, %q; want 1 and 10", code, out)
	}
	done := make(chan int)
	go func() {
		code, _ := check("--wait", "--max-wait", "10s")
		done <- code
	}()
	fake.WaitTimers(1)
	fake.Advance(10 * time.Second)
	if code := <-done; code != 0 {
		t.Errorf("--wait: exit %d", code)
	}
	if code, out := check(); code != 1 || out != "10\n" {
		t.Errorf("after the wait: exit %d, %q; the waiter spent the unit", code, out)
	}
}

// check --wait keeps its meaning beside the service's queue: it sleeps
// and decides again, holding nothing while it sleeps (a peek meanwhile
// sees the key as it was, not a unit held for the waiter).
func TestCheckWaitHoldsNothing(t *testing.T) {
	fake := clock.NewFake(time.Unix(t0, 0))
	defer func(c clock.Clock) { wallClock = c }(wallClock)
	wallClock = fake
	store := "--store=file:" + filepath.Join(t.TempDir(), "state.db")
	check := func(extra ...string) checkRun {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"check", store, "--policy", "token-bucket 1/10s"}, append(extra, "k")...),
			strings.NewReader(""), &stdout, &stderr)
		return checkRun{code, stdout.String(), stderr.String()}
	}
	wantRun(t, "first", check(), 0, "")
	done := make(chan checkRun, 1)
	go func() { done <- check("--wait") }()
	fake.WaitTimers(1)
	peek := `{"allowed":true,"retry_after":0,"limits":[{"key":"k","policy":"token-bucket 1/10s","allowed":true,"remaining":0,"retry_after":0,"reset_after":10}]}` + "\n"
	wantRun(t, "a peek while it sleeps", check("--cost", "0", "--json"), 0, peek)
	fake.Advance(10 * time.Second)
	wantRun(t, "the waiter", <-done, 0, "")
}

func TestCheckUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "--policy POLICY KEY or at least one --limit KEY=POLICY is required"},
		{[]string{"--policy", "token-bucket 1/1s"}, "exactly one KEY argument, got 0"},
		{[]string{"--policy", "token-bucket 1/1s", "a", "b"}, "exactly one KEY argument, got 2"},
		{[]string{"--policy", "nope 1/1s", "k"}, `--policy: invalid policy`},
		{[]string{"--policy", "token-bucket 1/1s", "--limit", "k=token-bucket 1/1s", "k"}, "not both"},
		{[]string{"--limit", "k"}, `"k" is not KEY=POLICY`},
		{[]string{"--limit", "k=token-bucket"}, `--limit: "k=token-bucket"`},
		{[]string{"--limit", "k=token-bucket 1/1s", "extra"}, `unexpected argument "extra"`},
		{[]string{"--limit", "k=token-bucket 1/1s", "--limit", "k=token-bucket 1/1s"}, "given twice"},
		{[]string{"--policy", "token-bucket 1/1s", "--cost", "-1", "k"}, "cannot be negative"},
		{[]string{"--policy", "token-bucket 1/1s", "--cost", "2", "--store", "memory", "k"}, "cost 2, burst 1"},
		{[]string{"--policy", "token-bucket 1/1s", "--max-wait", "1s", "k"}, "--max-wait needs --wait"},
		{[]string{"--policy", "token-bucket 1/1s", "--wait", "--max-wait", "-1s", "k"}, "cannot be negative"},
		{[]string{"--policy", "token-bucket 1/1s", "--wait", "--now", "0", "k"}, "cannot go together"},
		{[]string{"--policy", "token-bucket 1/1s", "--now", "yesterday", "k"}, `"yesterday" is neither Unix seconds nor an RFC 3339 time`},
		{[]string{"--policy", "token-bucket 1/1s", "--now", "1960-01-01T00:00:00Z", "k"}, "outside 1970 to 2116"},
		{[]string{"--policy", "token-bucket 1/1s", "--store", "mongodb://x", "k"}, "--store:"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"check"}, tt.args...), strings.NewReader(""), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tt.want) || stdout.Len() > 0 {
			t.Errorf("check %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, &stdout, &stderr, tt.want)
		}
	}
}

func TestLimitFlag(t *testing.T) {
	for _, tt := range []struct{ in, key, policy string }{
		{"k=token-bucket 1/1s", "k", "token-bucket 1/1s"},
		{"user=42=sliding-log 5/1m", "user=42", "sliding-log 5/1m"},
		{"=fixed-window 3/1h", "", "fixed-window 3/1h"},
		{"a=b=token-bucket 2/1s burst=4", "a=b", "token-bucket 2/1s burst=4"},
	} {
		var f limitFlags
		if err := f.Set(tt.in); err != nil || len(f) != 1 || f[0].key != tt.key || f[0].policy.String() != tt.policy {
			t.Errorf("Set(%q) = %v, %+v; want key %q policy %q", tt.in, err, f, tt.key, tt.policy)
		}
	}
}

// BenchmarkCheckProcess runs the floodgate check command as a shell
// script would, a new process each time, on a warm file store: its
// processes/s is what a script calling it in a loop can reach.
func BenchmarkCheckProcess(b *testing.B) {
	bin := floodgateBinary(b)
	store := "--store=file:" + filepath.Join(b.TempDir(), "state.db")
	args := []string{"check", store, "--policy", "token-bucket 1000000/1s", "k"}
	if err := exec.Command(bin, args...).Run(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := exec.Command(bin, args...).Run(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "processes/s")
}

// check --reset forgets a key's state, so that it starts afresh, even when
// the stored state is damaged and check itself cannot read it.
func TestCheckReset(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state.db")
	store := "--store=file:" + file
	check := func(args ...string) checkRun {
		return runBinary(t, nil, append([]string{"check", store, at(0), "--policy", "fixed-window 2/1h"}, args...)...)
	}
	wantRun(t, "first", check("k"), 0, "")
	wantRun(t, "second", check("k"), 0, "")
	wantRun(t, "third", check("k"), 1, "3600\n")
	wantRun(t, "--reset", check("--reset", "k"), 0, "")
	wantRun(t, "after --reset", check("k"), 0, "")

	// Damage every stored state of the file.
	db, err := bbolt.Open(file, 0o600, &bbolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			var keys [][]byte
			b.ForEach(func(k, v []byte) error {
				if v != nil {
					keys = append(keys, bytes.Clone(k))
				}
				return nil
			})
			for _, k := range keys {
				if err := b.Put(k, []byte{0xff, 0xee, 0xdd}); err != nil {
					return err
				}
			}
			return nil
		})
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := check("k"); got.code != 2 || !strings.Contains(got.stderr, "corrupt") {
		t.Errorf("a check on a damaged state: exit %d, %q; want 2, naming the damage", got.code, got.stderr)
	}
	wantRun(t, "--reset of a damaged state", check("--reset", "k"), 0, "")
	wantRun(t, "after that --reset", check("k"), 0, "")
	if got := check("--reset", "--wait", "k"); got.code != 2 || !strings.Contains(got.stderr, "--reset decides nothing") {
		t.Errorf("--reset --wait: exit %d %q", got.code, got.stderr)
	}
}
