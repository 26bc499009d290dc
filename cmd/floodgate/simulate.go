package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/seconds"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/storeurl"
	"github.com/floodgate/floodgate/trace"
)

const simulateUsage = `Usage: floodgate simulate --policy POLICY [FLAGS] [FILE]

Simulate replays a trace through POLICY with simulated time, to show what
the limit would have done to that traffic. It reads FILE, or standard input
when FILE is absent or "-", and writes one JSON line per event:

  {"t":12.345,"key":"alice","n":1,"allowed":true,"remaining":4,"retry_after":0,"reset_after":0.2}

Each key has its own state. Times are in seconds; retry_after is 0 for an
allowed event and -1 for one whose cost exceeds the burst, which can never
be admitted.

A trace has one event per line, in time order, as JSON or as text:

  {"t": 12.345, "key": "alice", "n": 1}
  12.345 alice 1

t is seconds since any origin; key defaults to "" and n (the cost) to 1.
Blank lines and lines starting with # are skipped.

With --input-format clf or combined, the trace is a web server's access
log instead, in the Common Log Format or in the Combined Log Format, which
adds the referer and the user-agent:

  127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326
  127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326 "-" "curl/8.5.0"

Each request is an event of cost 1, keyed by its client's address (see
--key), at its bracketed time read with its zone as Unix seconds (t is
971211336 above). Fields after the last are ignored, and blank lines
skipped. A server stamps a request with the time it began but logs it when
it ends, so a log's times may step back a little: a request stamped earlier
than the latest one before it is taken at that latest time, and a note on
standard error says how many were, and by how much at most.

Flags:
  --policy POLICY    the limit: ALGORITHM LIMIT/PERIOD [burst=B] [capacity=C],
                     with ALGORITHM one of token-bucket, leaky-bucket,
                     sliding-log, sliding-window, fixed-window
  --store URL        where the keys' state is kept while the trace plays:
                     memory (the default), file:PATH, redis://HOST:PORT[/DB],
                     unix:///PATH, redis-cluster://HOST:PORT[,HOST:PORT...]
                     or redis-sentinel://MASTER@HOST:PORT[,...]. Every store
                     decides exactly alike, so the output is the same; Redis
                     is decided at the trace's times, under keys of a prefix
                     of the run's own, deleted at the end (or an hour after a
                     run that was killed). A file keeps the state the run
                     ends with: a later run on the same file starts there.
                     Drained keys are deleted by each policy's own latest
                     time, so checks at the real time on other policies
                     leave a run's state alone (a policy used at both
                     times is swept by the later one, the keys it deletes
                     refused at the earlier time until they would have
                     drained there)
  --input-format F   the trace's format: native (the default, above), clf
                     or combined
  --key FIELD        with clf and combined, what a request's key is: host
                     (the client's address, the default), user (the
                     authenticated user, - for none), request (the request
                     line, such as GET /a.gif HTTP/1.0) or path (the
                     request's target up to any ?, such as /a.gif, or ""
                     for a request line without one)
  --summary          write a table of what the limit did to each key instead
                     of the event lines: events, admitted, refused, units
                     admitted and refused, the first refusal's time (a UTC
                     date for access logs) and the longest retry_after;
                     sorted by refused events, then events (most first),
                     then key, and ended by a TOTAL line
  --top N            with --summary, only the first N keys, then an OTHERS
                     line for the rest (default 0: every key). For traces
                     of millions of keys: the table holds N lines
  --plot PICTURE     draw what the limit did over time to PICTURE, an SVG or
                     PNG file by its extension (.svg or .png): a panel per
                     key for the keys with the most events (--plot-keys),
                     stacked on one time axis, with admitted events as green
                     dots and refused ones as red crosses at the units in
                     use after them (burst - remaining, or limit - remaining
                     for the window algorithms), that level as a step line
                     held until the key's next event or its reset, and the
                     burst as a dashed line. The event lines, or the
                     summary, are written too; add -q for the picture alone.
                     Only in a floodgate built with the plot tag (make
                     build, or go install -tags plot)
  --plot-keys N      how many keys --plot draws, 1 to 50 (default 4); ties
                     in events go in key order
  -q, --quiet        write no event lines (the summary is still written)

The summary and the picture are written once the whole trace has been
read, and not at all when it has an error; for the picture, every decision
is kept in memory until then (some 32 bytes each). When standard error is a
terminal and the trace a file of 16 MiB or more, a bar there shows how much
has been read, and is erased at the end.

Example:
  $ printf '0 alice\n1 alice\n2 alice\n2 bob\n' | floodgate simulate --policy 'sliding-log 2/10'
  {"t":0,"key":"alice","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
  {"t":1,"key":"alice","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}
  {"t":2,"key":"alice","n":1,"allowed":false,"remaining":0,"retry_after":8,"reset_after":9}
  {"t":2,"key":"bob","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}

  $ floodgate simulate --policy 'token-bucket 1/1s burst=3' --summary examples/traces/burst.trace
  KEY    EVENTS  ADMITTED  REFUSED  UNITS_ADMITTED  UNITS_REFUSED  FIRST_REFUSAL  LONGEST_RETRY
  alice  10      5         5        5               5              0.3            0.85s
  bob    3       3         0        3               0              -              -
  TOTAL  13      8         5        8               5              0.3            0.85s

The exit status is 0 on success, 2 for a bad flag, policy, FILE or trace,
and 1 when the decisions, the summary or the picture cannot be written or
the store fails.
`

// The formats of --input-format.
var inputFormats = []string{"native", "clf", "combined"}

// simulateOptions is what simulate's flags and arguments ask for: the flags
// as given, and what validate derives from them.
type simulateOptions struct {
	policyText  string          // --policy
	storeURL    string          // --store
	inputFormat string          // --input-format: native, clf or combined
	keyField    string          // --key
	summary     bool            // --summary
	top         int             // --top: the summary's keys; 0 for all
	plotFile    string          // --plot; "" for no picture
	plotKeys    int             // --plot-keys
	quiet       bool            // -q, --quiet
	set         map[string]bool // the flags given
	args        []string        // the arguments after the flags

	policy     algo.Policy  // --policy, parsed
	logKey     trace.LogKey // an access log's key (not for native traces)
	plotFormat string       // the picture's format, "svg" or "png", with --plot
	file       string       // the trace's file; "-" for standard input
}

// runSimulate is the simulate command.
func runSimulate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parseSimulateArgs(args)
	if err != nil {
		return badUsage("simulate", simulateUsage, err, stdout, stderr)
	}
	err = o.simulate(stdin, stdout, stderr)
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, new(usageError)):
		return badUsage("simulate", simulateUsage, err, stdout, stderr)
	}
	fmt.Fprintf(stderr, "floodgate simulate: %v\n", withRedisCause(err))
	if errors.As(err, new(outputError)) {
		return exitFailure
	}
	return exitUsage
}

// parseSimulateArgs parses simulate's flags and arguments and validates
// them.
func parseSimulateArgs(args []string) (*simulateOptions, error) {
	o := &simulateOptions{}
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed by runSimulate
	fs.StringVar(&o.policyText, "policy", "", "")
	fs.StringVar(&o.storeURL, "store", "memory", "")
	fs.StringVar(&o.inputFormat, "input-format", "native", "")
	fs.StringVar(&o.keyField, "key", "host", "")
	fs.BoolVar(&o.summary, "summary", false, "")
	fs.StringVar(&o.plotFile, "plot", "", "")
	fs.IntVar(&o.plotKeys, "plot-keys", 4, "")
	fs.IntVar(&o.top, "top", 0, "")
	fs.BoolVar(&o.quiet, "q", false, "")
	fs.BoolVar(&o.quiet, "quiet", false, "")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	o.set, o.args = givenFlags(fs), fs.Args()
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, nil
}

// validate checks the flags and arguments, and derives policy, logKey,
// plotFormat and file from them.
func (o *simulateOptions) validate() error {
	switch {
	case len(o.args) > 1 && strings.HasPrefix(o.args[1], "-"):
		return fmt.Errorf("too many arguments: %q (flags go before FILE)", o.args[1:])
	case len(o.args) > 1:
		return fmt.Errorf("too many arguments: %q (want at most one FILE)", o.args[1:])
	case len(o.args) == 1:
		o.file = o.args[0]
	default:
		o.file = "-"
	}
	switch {
	case o.policyText == "":
		return errors.New("--policy is required, such as --policy 'token-bucket 5/1s'")
	case o.top < 0:
		return fmt.Errorf("--top %d: cannot be negative", o.top)
	case o.set["top"] && !o.summary:
		return errors.New("--top is for --summary")
	}
	var err error
	if o.policy, err = algo.ParsePolicy(o.policyText); err != nil {
		return err
	}
	if o.logKey, err = o.validateInput(); err != nil {
		return err
	}
	o.plotFormat, err = o.validatePlot()
	return err
}

// validateInput checks --input-format and --key, and returns the key of
// an access log's requests.
func (o *simulateOptions) validateInput() (trace.LogKey, error) {
	if !slices.Contains(inputFormats, o.inputFormat) {
		return 0, fmt.Errorf("--input-format %q: unknown format (want native, clf or combined)", o.inputFormat)
	}
	if o.inputFormat == "native" {
		if o.set["key"] {
			return 0, errors.New("--key is for --input-format clf and combined (a native trace names its keys)")
		}
		return 0, nil
	}
	key, ok := parseLogKey(o.keyField)
	if !ok {
		return 0, fmt.Errorf("--key %q: unknown field (want host, user, request or path)", o.keyField)
	}
	return key, nil
}

// validatePlot checks --plot and --plot-keys, and returns the picture's
// format ("" without --plot).
func (o *simulateOptions) validatePlot() (string, error) {
	var format string
	if o.set["plot"] {
		var err error
		if format, err = plotFormat(o.plotFile); err != nil {
			return "", err
		}
	}
	switch {
	case o.plotKeys < 1 || o.plotKeys > maxPlotKeys:
		return "", fmt.Errorf("--plot-keys %d: want 1 to %d", o.plotKeys, maxPlotKeys)
	case o.set["plot-keys"] && !o.set["plot"]:
		return "", errors.New("--plot-keys is for --plot")
	case format != "" && !plotBuilt:
		return "", errNoPlot
	}
	return format, nil
}

// simulate replays the trace through the store and writes what o asks
// for. Its error is a usageError for a store that cannot be opened, an
// outputError when the output or the store fails, or a mistake in the
// trace.
func (o *simulateOptions) simulate(stdin io.Reader, stdout, stderr io.Writer) error {
	in, name := stdin, "standard input"
	if o.file != "-" {
		f, err := os.Open(o.file)
		if err != nil {
			return err
		}
		defer f.Close()
		in, name = f, filepath.Base(o.file)
	}
	var picture *pendingFile
	if o.plotFile != "" {
		// Fail now, not after the whole trace, when PICTURE cannot be written.
		var err error
		if picture, err = createPending(o.plotFile); err != nil {
			return outputError{fmt.Errorf("--plot: %w", err)}
		}
		defer picture.discard()
	}
	tb, done, err := openSimulationStore(o.storeURL, o.policy)
	if err != nil {
		return usagef("--store: %v", err)
	}
	sim, order := o.newSimulation(stdout)
	in, endProgress := simulateProgress.withProgress(in, name, stderr, sim.events)
	err = sim.run(tb, in)
	endProgress()
	if cerr := done(); err == nil && cerr != nil {
		err = outputError{cerr}
	}
	if order != nil && order.Moved > 0 {
		fmt.Fprintf(stderr, "floodgate simulate: %s\n", movedNote(order))
	}
	if err != nil {
		return err
	}
	return o.report(stdout, sim, picture)
}

// newSimulation returns the simulation o asks for, writing its decisions
// to stdout, and with an access log the InOrder that reads it (else nil).
func (o *simulateOptions) newSimulation(stdout io.Writer) (*simulation, *trace.InOrder) {
	sim := &simulation{}
	var order *trace.InOrder
	if o.inputFormat != "native" {
		order = &trace.InOrder{Format: trace.AccessLog{Combined: o.inputFormat == "combined", Key: o.logKey}.Parse}
		sim.format, sim.clock = order.Parse, true
	}
	if !o.summary && !o.quiet {
		sim.events = stdout
	}
	if o.summary || o.plotFile != "" {
		sim.stats = &runStats{keepPoints: o.plotFile != "", burst: o.policy.Burst()}
	}
	return sim, order
}

// report writes the summary of the run sim to stdout and its picture to
// picture (nil for none), as o asks.
func (o *simulateOptions) report(stdout io.Writer, sim *simulation, picture *pendingFile) error {
	if o.summary {
		if err := writeSummary(stdout, sim.stats, sim.clock, o.top); err != nil {
			return outputError{err}
		}
	}
	if picture == nil {
		return nil
	}
	err := picture.write(func(w io.Writer) error {
		return writePlot(w, o.plotFormat, sim.stats, o.plotKeys, o.policy, sim.clock)
	})
	if err != nil {
		return outputError{fmt.Errorf("--plot: %w", err)}
	}
	return nil
}

// movedNote says how many requests InOrder moved, and by how much.
func movedNote(o *trace.InOrder) string {
	by := string(seconds.Append(nil, o.MaxMove)) + "s"
	if o.Moved == 1 {
		return "1 request was stamped earlier than a request logged before it, and taken at the latest time seen (" + by + " later)"
	}
	return withCommas(o.Moved) + " requests were stamped earlier than a request logged before them, and taken at the latest time seen (" + by + " later at most)"
}

// parseLogKey returns the access log field named s.
func parseLogKey(s string) (trace.LogKey, bool) {
	for k := trace.LogHost; k <= trace.LogPath; k++ {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// outputError is a failure to write the decisions, or any other failure
// that is not the input's fault.
type outputError struct{ error }

// openSimulationStore returns the table of the store named by rawURL in
// which a run keeps its keys' state under p, and a function that ends the
// run: it deletes a shared store's keys and closes the connection. Memory
// holds every key of the trace (no bound, no eviction); Redis decides at
// the trace's times, under a prefix of the run's own.
func openSimulationStore(rawURL string, p algo.Policy) (store.Table, func() error, error) {
	var st store.Store
	done := func() error { return nil }
	if rawURL == "memory" {
		st = memstore.New(math.MaxInt)
	} else {
		s, closer, err := storeurl.Open(rawURL, storeurl.WithRedisOptions(redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour),
			redisstore.WithPrefix(fmt.Sprintf("floodgate:simulate:%016x:", rand.Uint64()))))
		if err != nil {
			return nil, nil, err
		}
		st = s
		done = func() error {
			var err error
			if c, ok := s.(interface{ Clear(context.Context) error }); ok { // a shared store: leave nothing behind
				err = c.Clear(context.Background())
			}
			return errors.Join(err, closer.Close())
		}
	}
	tb, err := st.Table("simulate", p)
	if err != nil {
		done()
		return nil, nil, err
	}
	return tb, done, nil
}

// simulation is what one run of the simulate command does with a trace.
type simulation struct {
	format trace.Format // the trace's format; nil means floodgate's own
	clock  bool         // the trace's times are Unix times, as in an access log
	events io.Writer    // where the decisions go as JSON lines; nil for nowhere
	stats  *runStats    // what the run did to each key, or nil
}

// run replays the trace in in through tb, each key with its own state,
// writes one decision per event to s.events and counts them in s.stats. It
// flushes s.events whenever it is about to wait for input, and before it
// returns. An error in the trace is returned as it is, after the decisions
// for the events before it.
func (s *simulation) run(tb store.Table, in io.Reader) error {
	ctx := context.Background()
	out := s.events
	if out == nil {
		out = io.Discard
	}
	w := bufio.NewWriterSize(out, 64<<10)
	tr := trace.NewReader(flushingReader{in, w})
	tr.Format = s.format
	var line []byte
	for {
		ev, err := tr.Next()
		if err != nil {
			if ferr := w.Flush(); ferr != nil {
				return outputError{ferr}
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
		d, err := tb.Decide(ctx, ev.Key, ev.T, ev.N)
		if err != nil && !errors.Is(err, algo.ErrCostExceedsBurst) {
			w.Flush()
			return outputError{fmt.Errorf("line %d: %w", ev.Line, err)}
		}
		if s.stats != nil {
			s.stats.add(ev, d)
		}
		if s.events != nil {
			line = appendDecision(line[:0], ev, d)
			if _, err := w.Write(line); err != nil {
				return outputError{err}
			}
		}
	}
}

// flushingReader flushes w before every read from r. A trace.Reader reads
// only when it holds no whole line, so the decisions reach the output
// whenever the input might block (line by line under tail -f) and in large
// chunks while a file is read.
type flushingReader struct {
	r io.Reader
	w *bufio.Writer
}

func (f flushingReader) Read(p []byte) (int, error) {
	f.w.Flush() // an error sticks in w, and the next write returns it
	return f.r.Read(p)
}

// appendDecision appends the JSON line for the event ev decided as d.
func appendDecision(b []byte, ev trace.Event, d algo.Decision) []byte {
	b = append(b, `{"t":`...)
	b = seconds.Append(b, ev.T)
	b = append(b, `,"key":`...)
	b = appendJSONString(b, ev.Key)
	b = append(b, `,"n":`...)
	b = strconv.AppendInt(b, ev.N, 10)
	b = append(b, `,"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"retry_after":`...)
	if d.RetryAfter == algo.Never {
		b = append(b, "-1"...)
	} else {
		b = seconds.Append(b, int64(d.RetryAfter))
	}
	b = append(b, `,"reset_after":`...)
	b = seconds.Append(b, int64(d.ResetAfter))
	return append(b, "}\n"...)
}

// appendJSONString appends s as a JSON string. It escapes only what JSON
// requires (quotes, backslashes, control characters), not <, > and &, and
// writes each byte of invalid UTF-8 as \ufffd, the replacement character.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, `\ufffd`...)
			} else {
				b = append(b, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '\r':
			b = append(b, `\r`...)
		case c == '\t':
			b = append(b, `\t`...)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
		i++
	}
	return append(b, '"')
}
