package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/seconds"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storeurl"
)

const filterUsage = `Usage: floodgate filter [--policy POLICY] [--global POLICY] [flags]

Filter copies standard input to standard output a line at a time, passing
only the lines that the limits admit when they arrive, and reports the
refused ones on standard error. It tames log storms and repeated alerts:

  journalctl -f | floodgate filter --policy 'sliding-log 5/1m' --key-field 5

Each line has a key: the whole line (the default: the same message repeated
is limited), one field of it (--key-field), or what a regular expression
finds in it (--key-regex). --policy limits each key; --global limits all
lines together; given both, or several of either, a line passes only if
every limit admits it, and a refused line spends nothing. A line without
the field or a match has the empty key.

With --max-delay D, filter paces instead of refusing at once, for log
shipping and alert streams: a line over the limits is held until they
admit it, if that is within D of when filter took it, and written then;
one that would wait longer is refused (and counted) at once. Lines keep
their order: those behind a held line wait in the input, so a writer
faster than the rate is slowed to it rather than losing lines, until a
line would wait past D. Nothing is held for a waiting line: a limit
shared through --store may admit others first.

D bounds each line's wait from when filter reads it, not from when it
was written: the time a line spends in the pipe behind a held one is not
counted, and a writer blocks once the pipe is full. So under a long
burst, a line can reach the output later than D after it was written;
D bounds filter's own delay, and the writer's slowdown is the pacing.

  app 2>&1 | floodgate filter --global 'token-bucket 100/1s burst=20' --max-delay 5s

An admitted line is written at once (before filter waits for more input).
At the end of the input, or on an interrupt (Ctrl-C), filter prints a
summary on standard error: lines read, passed and refused, and the keys
refused most.

Flags:
  --policy POLICY   a limit on each key: ALGORITHM LIMIT/PERIOD [burst=B]
                    [capacity=C], ALGORITHM one of token-bucket,
                    leaky-bucket, sliding-log, sliding-window, fixed-window
                    (repeatable)
  --global POLICY   a limit on all lines together (repeatable)
  --key-field N     the key is the Nth field (1 is the first), fields being
                    separated by spaces and tabs, as awk splits them
  --key-regex RE    the key is the first group of RE if it has one, else its
                    whole match (Go syntax, https://golang.org/s/re2syntax)
  --refused FILE    append the refused lines' reports to FILE instead of
                    writing them on standard error (/dev/null drops them)
  --max-delay D     pace: hold a line over the limits up to D (such as
                    500ms or 10s) from when filter reads it, until they
                    admit it, refusing it only past D; the summary counts
                    the lines delayed
  --top N           the summary lists the N keys refused most (default 10)
  --store URL       where the limits' state is kept: memory (the default),
                    file:PATH, redis://HOST:PORT[/DB], unix:///PATH,
                    redis-cluster://HOST:PORT[,...], to share limits with
                    other filters and checks

A refused line is reported as
  floodgate filter: refused, next in 42s (key "sshd[311]:", sliding-log 5/1m): LINE

Exit status: 0 at the end of the input, 130 on an interrupt, 2 for a bad
flag, policy or regular expression, 1 when reading, writing or the store
fails.
`

// wallClock is the clock check and filter read and sleep on: a variable so
// that tests can make time pass.
var wallClock clock.Clock = clock.Real{}

// maxTrackedKeys bounds the keys the summary counts one by one; refusals
// of keys beyond them count under "(other keys)".
const maxTrackedKeys = 100_000

// policyFlags collects a repeatable policy flag.
type policyFlags []algo.Policy

func (f *policyFlags) String() string { return "" }

func (f *policyFlags) Set(v string) error {
	p, err := algo.ParsePolicy(v)
	if err != nil {
		return err
	}
	*f = append(*f, p)
	return nil
}

// lineFilter decides lines and counts what it did.
type lineFilter struct {
	perKey, global []*floodgate.Limiter
	key            func(line string) string
	checks         []floodgate.Check
	maxDelay       time.Duration // --max-delay: 0, refuse at once

	read, passed, refused int64
	delayed               int64            // passed after a wait (--max-delay)
	refusedBy             map[string]int64 // by a per-key limit
	refusedOther          int64            // by a per-key limit, past maxTrackedKeys keys
	refusedGlobal         int64            // by a global limit
}

// filterOptions is what filter's flags ask for: the flags as given, and
// the key function validate derives from them.
type filterOptions struct {
	perKey      policyFlags   // --policy
	global      policyFlags   // --global
	keyField    int           // --key-field; 0 for none
	keyRegex    string        // --key-regex
	refusedPath string        // --refused
	top         int           // --top
	storeURL    string        // --store
	maxDelay    time.Duration // --max-delay

	key func(line string) string // a line's key
}

// runFilter is the filter command.
func runFilter(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runFilterTo(args, stdin, stdout, nil, stderr)
}

// runFilterTo is runFilter reporting the refused lines on refused, when
// not nil, instead of stderr or --refused.
func runFilterTo(args []string, stdin io.Reader, stdout, refused, stderr io.Writer) int {
	o, err := parseFilterArgs(args)
	if err != nil {
		return badUsage("filter", filterUsage, err, stdout, stderr)
	}
	st, closer, err := storeurl.Open(o.storeURL)
	if err != nil {
		return badUsage("filter", filterUsage, fmt.Errorf("--store: %w", err), stdout, stderr)
	}
	defer closer.Close()
	refused, closeRefused, err := o.refusedOutput(refused, stderr)
	if err != nil {
		return badUsage("filter", filterUsage, err, stdout, stderr)
	}
	defer closeRefused()
	lf, err := o.newLineFilter(st)
	if err != nil {
		return badUsage("filter", filterUsage, err, stdout, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = lf.run(ctx, stdin, stdout, refused)
	lf.summary(stderr, o.top)
	switch {
	case errors.Is(err, context.Canceled):
		return 130
	case err != nil:
		fmt.Fprintf(stderr, "floodgate filter: %v\n", withRedisCause(err))
		return exitFailure
	}
	return exitOK
}

// parseFilterArgs parses filter's flags and validates them.
func parseFilterArgs(args []string) (*filterOptions, error) {
	o := &filterOptions{}
	fs := flag.NewFlagSet("filter", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed by runFilterTo
	fs.Var(&o.perKey, "policy", "")
	fs.Var(&o.global, "global", "")
	fs.IntVar(&o.keyField, "key-field", 0, "")
	fs.StringVar(&o.keyRegex, "key-regex", "", "")
	fs.StringVar(&o.refusedPath, "refused", "", "")
	fs.IntVar(&o.top, "top", 10, "")
	fs.DurationVar(&o.maxDelay, "max-delay", 0, "")
	fs.StringVar(&o.storeURL, "store", "memory", "")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: filter reads standard input", fs.Arg(0))
	}
	if givenFlags(fs)["key-field"] && o.keyField == 0 {
		return nil, errors.New("--key-field 0: fields count from 1")
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// validate checks the flags and sets the key function (keyFunc).
func (o *filterOptions) validate() error {
	switch {
	case len(o.perKey)+len(o.global) == 0:
		return errors.New("--policy POLICY or --global POLICY is required, such as --policy 'sliding-log 5/1m'")
	case o.keyField != 0 && o.keyRegex != "":
		return errors.New("give --key-field or --key-regex, not both")
	case o.keyField < 0:
		return fmt.Errorf("--key-field %d: fields count from 1", o.keyField)
	case o.top < 0:
		return fmt.Errorf("--top %d: cannot be negative", o.top)
	case o.maxDelay < 0:
		return fmt.Errorf("--max-delay %v: a delay cannot be negative", o.maxDelay)
	case len(o.perKey) == 0 && (o.keyField != 0 || o.keyRegex != ""):
		return errors.New("--key-field and --key-regex choose the key of --policy, and there is none")
	}
	var err error
	o.key, err = o.keyFunc()
	return err
}

// keyFunc returns the function that gives a line's key: its field
// --key-field, what --key-regex finds in it, or else the line itself.
func (o *filterOptions) keyFunc() (func(line string) string, error) {
	switch {
	case o.keyField > 0:
		n := o.keyField
		return func(line string) string { return field(line, n) }, nil
	case o.keyRegex != "":
		re, err := regexp.Compile(o.keyRegex)
		if err != nil {
			return nil, fmt.Errorf("--key-regex: %w", err)
		}
		return regexKey(re), nil
	}
	return func(line string) string { return line }, nil
}

// refusedOutput returns where the refused lines are reported: refused
// when not nil, else the file of --refused, else stderr; and a function
// that closes the file.
func (o *filterOptions) refusedOutput(refused, stderr io.Writer) (io.Writer, func(), error) {
	switch {
	case refused != nil:
		return refused, func() {}, nil
	case o.refusedPath == "":
		return stderr, func() {}, nil
	}
	f, err := os.OpenFile(o.refusedPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("--refused: %w", err)
	}
	return f, func() { f.Close() }, nil
}

// newLineFilter returns the filter of the flags' limits, each keeping its
// state in st.
func (o *filterOptions) newLineFilter(st store.Store) (*lineFilter, error) {
	lf := &lineFilter{key: o.key, refusedBy: make(map[string]int64), maxDelay: o.maxDelay}
	var err error
	if lf.perKey, err = newLimiters("--policy", o.perKey, st); err != nil {
		return nil, err
	}
	if lf.global, err = newLimiters("--global", o.global, st); err != nil {
		return nil, err
	}
	return lf, nil
}

// newLimiters returns a limiter on wallClock for each policy of the flag
// name, keeping their state in st.
func newLimiters(name string, policies []algo.Policy, st store.Store) ([]*floodgate.Limiter, error) {
	var ls []*floodgate.Limiter
	for _, p := range policies {
		l, err := floodgate.NewLimiter(p, floodgate.WithStore(st), floodgate.WithClock(wallClock))
		if err != nil {
			return nil, fmt.Errorf("%s %v: %w", name, p, err)
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// field returns the nth (from 1) field of line split on spaces and tabs,
// or "" when it has fewer.
func field(line string, n int) string {
	for f := range strings.FieldsFuncSeq(line, func(r rune) bool { return r == ' ' || r == '\t' }) {
		if n--; n == 0 {
			return f
		}
	}
	return ""
}

// regexKey returns a key function taking re's first group, or its whole
// match when it has no group; "" without a match.
func regexKey(re *regexp.Regexp) func(string) string {
	return func(line string) string {
		m := re.FindStringSubmatchIndex(line)
		switch {
		case m == nil:
			return ""
		case len(m) >= 4 && m[2] >= 0:
			return line[m[2]:m[3]]
		case len(m) >= 4:
			return "" // the group took no part in the match
		}
		return line[m[0]:m[1]]
	}
}

// run copies the admitted lines of in to out, reporting the refused ones
// on refused, until in ends (nil), ctx is done (its error), or reading,
// writing or the store fails.
func (lf *lineFilter) run(ctx context.Context, in io.Reader, out, refused io.Writer) error {
	w := bufio.NewWriter(out)
	lines := make(chan readLine)
	done := make(chan struct{})
	defer close(done)
	go readLines(in, lines, done)
	for {
		var l readLine
		var ok bool
		select {
		case l, ok = <-lines:
		default:
			// Nothing more to hand: the lines passed so far go out now.
			if err := w.Flush(); err != nil {
				return fmt.Errorf("writing: %w", err)
			}
			select {
			case l, ok = <-lines:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if !ok {
			if err := w.Flush(); err != nil {
				return fmt.Errorf("writing: %w", err)
			}
			return nil
		}
		if l.err != nil {
			w.Flush()
			return fmt.Errorf("reading: %w", l.err)
		}
		pass, report, err := lf.decide(ctx, l.text, w.Flush)
		if err != nil {
			w.Flush()
			return err
		}
		if pass {
			w.WriteString(l.text)
			if _, err := w.WriteString(l.end); err != nil {
				return fmt.Errorf("writing: %w", err)
			}
		} else if _, err := io.WriteString(refused, report); err != nil {
			return fmt.Errorf("reporting a refused line: %w", err)
		}
	}
}

// readLine is one line of input without its ending, which end holds ("\n",
// "\r\n", or "" for a last line without one), or a read error.
type readLine struct {
	text, end string
	err       error
}

// readLines sends the lines of in on lines, then closes it; it stops early
// when done is closed.
func readLines(in io.Reader, lines chan<- readLine, done <-chan struct{}) {
	defer close(lines)
	r := bufio.NewReaderSize(in, 64<<10)
	for {
		s, err := r.ReadString('\n')
		if s != "" {
			l := readLine{text: s}
			if strings.HasSuffix(s, "\n") {
				l.text, l.end = s[:len(s)-1], "\n"
				if strings.HasSuffix(l.text, "\r") {
					l.text, l.end = l.text[:len(l.text)-1], "\r\n"
				}
			}
			select {
			case lines <- l:
			case <-done:
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				select {
				case lines <- readLine{err: err}:
				case <-done:
				}
			}
			return
		}
	}
}

// decide decides one line: whether it passes, and if not the report of
// its refusal. With --max-delay, a line that waiting would admit is held
// (pace), after flush has written out the lines before it.
func (lf *lineFilter) decide(ctx context.Context, line string, flush func() error) (bool, string, error) {
	lf.read++
	key := lf.key(line)
	lf.checks = lf.checks[:0]
	for _, l := range lf.perKey {
		lf.checks = append(lf.checks, floodgate.Check{Limiter: l, Key: key, N: 1})
	}
	for _, l := range lf.global {
		lf.checks = append(lf.checks, floodgate.Check{Limiter: l, Key: "*", N: 1})
	}
	md, err := floodgate.AllowAll(ctx, lf.checks...)
	if err == nil && !md.Allowed && lf.maxDelay > 0 && md.RetryAfter <= lf.maxDelay {
		md, err = lf.pace(ctx, flush)
	}
	if err != nil {
		return false, "", err
	}
	if md.Allowed {
		lf.passed++
		return true, "", nil
	}
	lf.refused++
	c := lf.checks[md.Denied]
	which := "global"
	if md.Denied < len(lf.perKey) {
		which = "key " + strconv.Quote(key)
		if _, ok := lf.refusedBy[key]; ok || len(lf.refusedBy) < maxTrackedKeys {
			lf.refusedBy[key]++
		} else {
			lf.refusedOther++
		}
	} else {
		lf.refusedGlobal++
	}
	return false, fmt.Sprintf("floodgate filter: refused, next in %s (%s, %s): %s\n",
		roundWait(md.RetryAfter), which, c.Limiter.Policy(), line), nil
}

// pace holds the line of lf.checks until they admit it, within
// lf.maxDelay, or it would wait longer (check --wait's loop), and counts
// it delayed when admitted.
func (lf *lineFilter) pace(ctx context.Context, flush func() error) (floodgate.MultiDecision, error) {
	if err := flush(); err != nil {
		return floodgate.MultiDecision{}, fmt.Errorf("writing: %w", err)
	}
	md, err := decideChecks(ctx, wallClock, lf.checks, true, lf.maxDelay)
	if err == nil && md.Allowed {
		lf.delayed++
	}
	return md, err
}

// roundWait prints a wait rounded up to a readable unit.
func roundWait(d time.Duration) string {
	switch {
	case d == algo.Never:
		return "never"
	case d >= time.Second:
		return (time.Duration(seconds.Ceil(d)) * time.Second).String()
	case d >= time.Millisecond:
		return ((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond).String()
	}
	return d.String()
}

// summary writes the counts and the top keys refused most.
func (lf *lineFilter) summary(w io.Writer, top int) {
	delayed := ""
	if lf.maxDelay > 0 {
		delayed = fmt.Sprintf(" (%d delayed)", lf.delayed)
	}
	fmt.Fprintf(w, "floodgate filter: %d lines read, %d passed%s, %d refused\n", lf.read, lf.passed, delayed, lf.refused)
	if lf.refusedGlobal > 0 {
		fmt.Fprintf(w, "  %8d  refused by the global limit\n", lf.refusedGlobal)
	}
	if len(lf.refusedBy) == 0 || top == 0 {
		return
	}
	type kc struct {
		key string
		n   int64
	}
	keys := make([]kc, 0, len(lf.refusedBy))
	for k, n := range lf.refusedBy {
		keys = append(keys, kc{k, n})
	}
	slices.SortFunc(keys, func(a, b kc) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.key, b.key)) })
	fmt.Fprintf(w, "  %8s  key (by the per-key limit)\n", "refused")
	for _, k := range keys[:min(top, len(keys))] {
		fmt.Fprintf(w, "  %8d  %s\n", k.n, strconv.Quote(k.key))
	}
	if rest := len(keys) - top; rest > 0 {
		fmt.Fprintf(w, "  (%d more keys)\n", rest)
	}
	if lf.refusedOther > 0 {
		fmt.Fprintf(w, "  %8d  other keys (past the first %d)\n", lf.refusedOther, maxTrackedKeys)
	}
}
