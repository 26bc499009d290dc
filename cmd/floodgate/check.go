package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/seconds"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/storeurl"
)

const checkUsage = `Usage: floodgate check --policy POLICY [flags] KEY
       floodgate check --limit KEY=POLICY [--limit KEY=POLICY ...] [flags]

Check decides one event on KEY under POLICY, spends its cost when admitted,
and says so in its exit status, for shell scripts, cron jobs and CGI
programs that run again and again and share their limits:

  floodgate check --policy 'leaky-bucket 1/1h capacity=20' sms && send_sms "$msg"

Exit status: 0 admitted; 1 limited, with the seconds to wait printed on
standard output (whole seconds, rounded up); 2 for a bad flag, policy or
cost, or a store that fails (a message on standard error).

Several --limit pairs are checked all or nothing: the event is admitted
only if every limit admits it, and then each spends the cost; if one
refuses, none spends anything (a per-user and a global limit, say):

  floodgate check --limit "cgi:$REMOTE_ADDR=sliding-log 5/1m" \
                  --limit 'cgi=sliding-log 100/1m' || exit 0

Each key's state is kept per policy: the same KEY under another policy is
another limit. The state lives in a file by default, so that every run
shares it; processes using the file at once wait for each other (a few
milliseconds per decision), and a killed one leaves it intact.

Flags:
  --policy POLICY   the limit on KEY: ALGORITHM LIMIT/PERIOD [burst=B]
                    [capacity=C], ALGORITHM one of token-bucket,
                    leaky-bucket, sliding-log, sliding-window, fixed-window
  --limit K=POLICY  a limit on key K (repeatable; instead of --policy KEY)
  --cost N          the event's cost in units (default 1; 0 only looks)
  --store URL       where the state is kept: file:PATH, memory (useless
                    across runs), redis://HOST:PORT[/DB], unix:///PATH,
                    redis-cluster://HOST:PORT[,HOST:PORT...]; default
                    $FLOODGATE_STORE, else file:` + "`" + `the state file` + "`" + `, which is
                    $XDG_STATE_HOME/floodgate/state.db (~/.local/state/...)
  --wait            when limited, sleep until admitted instead of exiting 1
  --max-wait D      with --wait, exit 1 at once if the wait would pass D
                    (such as 30s or 5m; default: no bound)
  --now T           decide at T (Unix seconds, or RFC 3339 such as
                    2026-11-23T15:04:05Z) instead of now: for replaying
                    events and for tests; not with --wait
  --json            print the decision as one JSON line on standard output,
                    admitted or not:
                    {"allowed":false,"retry_after":3.2,"limits":[{"key":"sms",
                    "policy":"leaky-bucket 1/1h capacity=20","allowed":false,
                    "remaining":0,"retry_after":3.2,"reset_after":72000}]}
                    (seconds; retry_after is 0 when admitted)
`

// checkLimit is one limit of a check: a policy on a key.
type checkLimit struct {
	key    string
	policy algo.Policy
}

// runCheck is the check command.
func runCheck(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	policyText := fs.String("policy", "", "")
	var limits limitFlags
	fs.Var(&limits, "limit", "")
	cost := fs.Int64("cost", 1, "")
	storeURL := fs.String("store", "", "")
	wait := fs.Bool("wait", false, "")
	maxWait := fs.Duration("max-wait", 0, "")
	nowText := fs.String("now", "", "")
	asJSON := fs.Bool("json", false, "")
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "floodgate check: "+format+"\nRun 'floodgate check -h' for usage.\n", a...)
		return exitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, checkUsage)
			return exitOK
		}
		return usageError("%v", err)
	}
	rest := fs.Args()
	switch {
	case *policyText != "" && len(limits) > 0:
		return usageError("give either --policy and a KEY or --limit KEY=POLICY pairs, not both")
	case *policyText != "":
		if len(rest) != 1 {
			return usageError("--policy takes exactly one KEY argument, got %d (flags go before KEY)", len(rest))
		}
		p, err := algo.ParsePolicy(*policyText)
		if err != nil {
			return usageError("--policy: %v", err)
		}
		limits = append(limits, checkLimit{rest[0], p})
	case len(limits) == 0:
		return usageError("--policy POLICY KEY or at least one --limit KEY=POLICY is required")
	case len(rest) > 0:
		return usageError("unexpected argument %q: with --limit, the keys are in the limits", rest[0])
	}
	for i, l := range limits {
		for _, m := range limits[:i] {
			if m == l {
				return usageError("the limit %q on %q is given twice", l.policy, l.key)
			}
		}
	}
	if *cost < 0 {
		return usageError("--cost %d: a cost cannot be negative", *cost)
	}
	if *maxWait < 0 {
		return usageError("--max-wait %v: a wait cannot be negative", *maxWait)
	}
	if *maxWait > 0 && !*wait {
		return usageError("--max-wait needs --wait")
	}
	clk := wallClock
	if *nowText != "" {
		if *wait {
			return usageError("--now and --wait cannot go together: a check at a given time cannot sleep")
		}
		ns, err := parseInstant(*nowText)
		if err != nil {
			return usageError("--now: %v", err)
		}
		clk = clock.NewFake(time.Unix(0, ns))
	}

	url, err := checkStoreURL(*storeURL)
	if err != nil {
		fmt.Fprintf(stderr, "floodgate check: %v\n", err)
		return exitUsage
	}
	var extra []redisstore.Option
	if *nowText != "" {
		extra = append(extra, redisstore.WithCallerTime()) // Redis decides at --now, not on its clock
	}
	store, closer, err := storeurl.Open(url, extra...)
	if err != nil {
		return usageError("--store: %v", err)
	}
	defer closer.Close()

	checks := make([]floodgate.Check, len(limits))
	for i, l := range limits {
		lim, err := floodgate.NewLimiter(l.policy, floodgate.WithStore(store), floodgate.WithClock(clk))
		if err != nil {
			fmt.Fprintf(stderr, "floodgate check: %v\n", err)
			return exitUsage
		}
		checks[i] = floodgate.Check{Limiter: lim, Key: l.key, N: *cost}
	}
	md, err := decideChecks(context.Background(), clk, checks, *wait, *maxWait)
	if err != nil {
		if errors.Is(err, algo.ErrCostExceedsBurst) {
			return usageError("%v", err)
		}
		fmt.Fprintf(stderr, "floodgate check: %v\n", err)
		return exitUsage
	}
	if *asJSON {
		fmt.Fprintf(stdout, "%s\n", appendCheckJSON(nil, limits, md))
	} else if !md.Allowed {
		fmt.Fprintln(stdout, seconds.Ceil(md.RetryAfter))
	}
	if !md.Allowed {
		return exitFailure
	}
	return exitOK
}

// decideChecks decides checks all or nothing; with wait, a refusal that a
// wait within maxWait (0: any) would cure is slept off on clk and the checks
// decided again, until they are admitted.
func decideChecks(ctx context.Context, clk clock.Clock, checks []floodgate.Check, wait bool, maxWait time.Duration) (floodgate.MultiDecision, error) {
	var waited time.Duration
	for {
		md, err := floodgate.AllowAll(ctx, checks...)
		if err != nil || md.Allowed || !wait || md.RetryAfter == algo.Never {
			return md, err
		}
		if maxWait > 0 && waited+md.RetryAfter > maxWait {
			return md, nil
		}
		t := clk.NewTimer(md.RetryAfter)
		<-t.C()
		waited += md.RetryAfter
	}
}

// limitFlags collects --limit KEY=POLICY pairs.
type limitFlags []checkLimit

func (f *limitFlags) String() string { return "" }

// Set splits at the first "=" that is followed by a valid policy, so that
// a key may hold "=" itself (a policy's own "burst=B" is never a policy).
func (f *limitFlags) Set(v string) error {
	var firstErr error
	for i := 0; i < len(v); i++ {
		if v[i] != '=' {
			continue
		}
		p, err := algo.ParsePolicy(v[i+1:])
		if err == nil {
			*f = append(*f, checkLimit{v[:i], p})
			return nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return fmt.Errorf("%q: %w", v, firstErr)
	}
	return fmt.Errorf("%q is not KEY=POLICY", v)
}

// checkStoreURL is the store check uses: the flag, else $FLOODGATE_STORE,
// else the state file, whose directory it creates.
func checkStoreURL(flagValue string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	if env := os.Getenv("FLOODGATE_STORE"); env != "" {
		return env, nil
	}
	dir, err := stateDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("the state directory: %w", err)
	}
	return "file:" + filepath.Join(dir, "state.db"), nil
}

// stateDir is floodgate's directory for state that outlives a run:
// $XDG_STATE_HOME/floodgate, else the platform's place for it
// (~/.local/state/floodgate; ~/Library/Application Support/floodgate on
// macOS; %LOCALAPPDATA%\floodgate on Windows).
func stateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "floodgate"), nil
	}
	switch runtime.GOOS {
	case "darwin", "ios", "windows", "plan9":
		d, err := os.UserConfigDir() // Application Support; %AppData%
		if runtime.GOOS == "windows" {
			if local := os.Getenv("LocalAppData"); local != "" {
				d, err = local, nil
			}
		}
		if err != nil {
			return "", fmt.Errorf("no directory for the state file (set --store or $FLOODGATE_STORE): %w", err)
		}
		return filepath.Join(d, "floodgate"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no directory for the state file (set --store, $FLOODGATE_STORE or $XDG_STATE_HOME): %w", err)
	}
	return filepath.Join(home, ".local", "state", "floodgate"), nil
}

// parseInstant reads Unix seconds (seconds.Parse) or an RFC 3339 time
// as nanoseconds since the Unix epoch.
func parseInstant(s string) (int64, error) {
	if ns, err := seconds.Parse(s); err == nil {
		return ns, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither Unix seconds nor an RFC 3339 time", s)
	}
	if t.Unix() < 0 || t.Year() > 2116 {
		return 0, fmt.Errorf("%q is outside 1970 to 2116", s)
	}
	return t.UnixNano(), nil
}

// appendCheckJSON appends the decision as JSON (see checkUsage).
func appendCheckJSON(b []byte, limits []checkLimit, md floodgate.MultiDecision) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, md.Allowed)
	b = append(b, `,"retry_after":`...)
	b = appendWait(b, md.RetryAfter)
	b = append(b, `,"limits":[`...)
	for i, l := range limits {
		d := md.Decisions[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = appendJSONString(b, l.key)
		b = append(b, `,"policy":`...)
		b = appendJSONString(b, l.policy.String())
		b = append(b, `,"allowed":`...)
		b = strconv.AppendBool(b, d.Allowed)
		b = append(b, `,"remaining":`...)
		b = strconv.AppendInt(b, d.Remaining, 10)
		b = append(b, `,"retry_after":`...)
		b = appendWait(b, d.RetryAfter)
		b = append(b, `,"reset_after":`...)
		b = seconds.Append(b, int64(d.ResetAfter))
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendWait appends a wait in seconds, -1 for Never.
func appendWait(b []byte, d time.Duration) []byte {
	if d == algo.Never {
		return append(b, "-1"...)
	}
	return seconds.Append(b, int64(d))
}
