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
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/filestore"
	"github.com/floodgate/floodgate/internal/seconds"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
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
cost, or a store that fails (a message on standard error): a state file
that is damaged, or not floodgate's (such as an empty file), is such a
failure, and is never replaced; restore it from a copy, or remove it to
start afresh.

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
                    events and for tests; not with --wait. The file store
                    deletes a policy's drained keys by the latest time
                    that policy's own checks used: a --now far ahead
                    leaves other policies alone; keys of its own policy
                    so deleted are refused at the real time until they
                    would have drained
  --reset           forget the state of KEY under POLICY (of each --limit),
                    deciding nothing: the key starts afresh (exit 0); a key
                    whose stored state is damaged is reset without reading it
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

// checkOptions is what check's flags and arguments ask for: the flags as
// given, and what validate derives from them.
type checkOptions struct {
	policyText string        // --policy
	limits     limitFlags    // --limit, and then --policy on KEY too
	cost       int64         // --cost
	storeURL   string        // --store
	wait       bool          // --wait
	maxWait    time.Duration // --max-wait
	nowText    string        // --now
	asJSON     bool          // --json
	reset      bool          // --reset
	args       []string      // the arguments after the flags

	clock clock.Clock // the clock decisions read: wallClock, or stopped at --now
}

// runCheck is the check command.
func runCheck(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	o, err := parseCheckArgs(args)
	if err != nil {
		return badUsage("check", checkUsage, err, stdout, stderr)
	}
	st, closer, err := o.openStore()
	if err != nil {
		return checkFailed(err, stdout, stderr)
	}
	defer closer.Close()
	if o.reset {
		if err := o.resetKeys(st); err != nil {
			return checkFailed(err, stdout, stderr)
		}
		return exitOK
	}
	md, err := o.decide(st)
	if err != nil {
		return checkFailed(err, stdout, stderr)
	}
	return o.report(stdout, md)
}

// parseCheckArgs parses check's flags and arguments and validates them.
func parseCheckArgs(args []string) (*checkOptions, error) {
	o := &checkOptions{}
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed by runCheck
	fs.StringVar(&o.policyText, "policy", "", "")
	fs.Var(&o.limits, "limit", "")
	fs.Int64Var(&o.cost, "cost", 1, "")
	fs.StringVar(&o.storeURL, "store", "", "")
	fs.BoolVar(&o.wait, "wait", false, "")
	fs.DurationVar(&o.maxWait, "max-wait", 0, "")
	fs.StringVar(&o.nowText, "now", "", "")
	fs.BoolVar(&o.asJSON, "json", false, "")
	fs.BoolVar(&o.reset, "reset", false, "")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	o.args = fs.Args()
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// validate checks the flags and arguments, adds --policy on KEY to the
// limits, and sets the clock.
func (o *checkOptions) validate() error {
	if err := o.validateLimits(); err != nil {
		return err
	}
	switch {
	case o.cost < 0:
		return fmt.Errorf("--cost %d: a cost cannot be negative", o.cost)
	case o.maxWait < 0:
		return fmt.Errorf("--max-wait %v: a wait cannot be negative", o.maxWait)
	case o.maxWait > 0 && !o.wait:
		return errors.New("--max-wait needs --wait")
	case o.reset && (o.wait || o.asJSON || o.cost != 1):
		return errors.New("--reset decides nothing: not with --wait, --json or --cost")
	}
	return o.setClock()
}

// validateLimits checks that the limits come from either --policy and
// KEY or --limit, adds the one of --policy to them, and checks that none
// is given twice.
func (o *checkOptions) validateLimits() error {
	switch {
	case o.policyText != "" && len(o.limits) > 0:
		return errors.New("give either --policy and a KEY or --limit KEY=POLICY pairs, not both")
	case o.policyText != "":
		if len(o.args) != 1 {
			return fmt.Errorf("--policy takes exactly one KEY argument, got %d (flags go before KEY)", len(o.args))
		}
		p, err := algo.ParsePolicy(o.policyText)
		if err != nil {
			return fmt.Errorf("--policy: %w", err)
		}
		o.limits = append(o.limits, checkLimit{o.args[0], p})
	case len(o.limits) == 0 && len(o.args) > 1 && strings.HasPrefix(o.args[1], "-"):
		return fmt.Errorf("%s comes after the KEY %q: flags go before it", o.args[1], o.args[0])
	case len(o.limits) == 0:
		return errors.New("--policy POLICY KEY or at least one --limit KEY=POLICY is required")
	case len(o.args) > 0:
		return fmt.Errorf("unexpected argument %q: with --limit, the keys are in the limits", o.args[0])
	}
	for i, l := range o.limits {
		if slices.Contains(o.limits[:i], l) {
			return fmt.Errorf("the limit %q on %q is given twice", l.policy, l.key)
		}
	}
	return nil
}

// setClock sets the clock of the decisions: wallClock, or with --now a
// clock stopped at that time.
func (o *checkOptions) setClock() error {
	o.clock = wallClock
	if o.nowText == "" {
		return nil
	}
	if o.wait {
		return errors.New("--now and --wait cannot go together: a check at a given time cannot sleep")
	}
	ns, err := parseInstant(o.nowText)
	if err != nil {
		return fmt.Errorf("--now: %w", err)
	}
	o.clock = clock.NewFake(time.Unix(0, ns))
	return nil
}

// openStore opens the store of --store, else of $FLOODGATE_STORE, else
// the state file. A store that cannot be opened is a usageError, except a
// file that is there but damaged, not a store, or locked too long.
func (o *checkOptions) openStore() (store.Store, io.Closer, error) {
	url, err := checkStoreURL(o.storeURL)
	if err != nil {
		return nil, nil, err
	}
	var extra []redisstore.Option
	if o.nowText != "" {
		extra = append(extra, redisstore.WithCallerTime()) // Redis decides at --now, not on its clock
	}
	st, closer, err := storeurl.Open(url, storeurl.WithRedisOptions(extra...))
	switch {
	case errors.Is(err, filestore.ErrCorrupt), errors.Is(err, filestore.ErrNotStore), errors.Is(err, filestore.ErrLocked):
		return nil, nil, err // the file is there, but unusable: a store error
	case err != nil:
		from := "--store"
		if o.storeURL == "" {
			from = "$FLOODGATE_STORE" // the state file always opens, or fails elsewhere
		}
		return nil, nil, usagef("%s: %v", from, err)
	}
	return st, closer, nil
}

// decide decides the event under every limit, all or nothing, with the
// state in st. A cost above a limit's burst is a usageError.
func (o *checkOptions) decide(st store.Store) (floodgate.MultiDecision, error) {
	checks := make([]floodgate.Check, len(o.limits))
	for i, l := range o.limits {
		lim, err := floodgate.NewLimiter(l.policy, floodgate.WithStore(st), floodgate.WithClock(o.clock))
		if err != nil {
			return floodgate.MultiDecision{}, err
		}
		checks[i] = floodgate.Check{Limiter: lim, Key: l.key, N: o.cost, Peek: o.cost == 0}
	}
	md, err := decideChecks(context.Background(), o.clock, checks, o.wait, o.maxWait)
	if errors.Is(err, algo.ErrCostExceedsBurst) {
		return md, usageError{err}
	}
	return md, err
}

// resetKeys forgets the state of every limit's key under its policy: the
// keys start afresh. A key whose stored state is damaged is reset too,
// without being read.
func (o *checkOptions) resetKeys(st store.Store) error {
	for _, l := range o.limits {
		lim, err := floodgate.NewLimiter(l.policy, floodgate.WithStore(st), floodgate.WithClock(o.clock))
		if err == nil {
			err = lim.Reset(context.Background(), l.key)
		}
		if err != nil {
			return fmt.Errorf("--reset %q under %q: %w", l.key, l.policy, err)
		}
	}
	return nil
}

// report writes the decision md on stdout as check's flags ask, and
// returns the exit code: exitOK when admitted, exitFailure when limited.
func (o *checkOptions) report(stdout io.Writer, md floodgate.MultiDecision) int {
	if o.asJSON {
		fmt.Fprintf(stdout, "%s\n", appendCheckJSON(nil, o.limits, md))
	} else if !md.Allowed {
		fmt.Fprintln(stdout, seconds.Ceil(md.RetryAfter))
	}
	if !md.Allowed {
		return exitFailure
	}
	return exitOK
}

// checkFailed reports err, which stopped check before a decision, and
// returns exitUsage: a usageError with where to find the usage, any other
// error alone.
func checkFailed(err error, stdout, stderr io.Writer) int {
	if errors.As(err, new(usageError)) {
		return badUsage("check", checkUsage, err, stdout, stderr)
	}
	fmt.Fprintf(stderr, "floodgate check: %v\n", withRedisCause(err))
	return exitUsage
}

// decideChecks decides checks all or nothing; with wait, a refusal that a
// wait within maxWait (0: any) would cure is slept off on clk and the checks
// decided again, until they are admitted or ctx is done (its error). It
// holds nothing while it sleeps: others may go first.
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
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return md, ctx.Err()
		}
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
		return 0, fmt.Errorf("%.64q is neither Unix seconds nor an RFC 3339 time", s)
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
