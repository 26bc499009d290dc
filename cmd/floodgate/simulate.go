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
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/storeurl"
	"github.com/floodgate/floodgate/trace"
)

const simulateUsage = `Usage: floodgate simulate --policy POLICY [--store URL] [FILE]

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

Flags:
  --policy POLICY  the limit: ALGORITHM LIMIT/PERIOD [burst=B] [capacity=C],
                   with ALGORITHM one of token-bucket, leaky-bucket,
                   sliding-log, sliding-window, fixed-window
  --store URL      where the keys' state is kept while the trace plays:
                   memory (the default), redis://HOST:PORT[/DB],
                   unix:///PATH, redis-cluster://HOST:PORT[,HOST:PORT...]
                   or redis-sentinel://MASTER@HOST:PORT[,...]. Every store
                   decides exactly alike, so the output is the same; Redis
                   is decided at the trace's times, under keys of a prefix
                   of the run's own, deleted at the end (or an hour after a
                   run that was killed).

Example:
  $ printf '0 alice\n1 alice\n2 alice\n2 bob\n' | floodgate simulate --policy 'sliding-log 2/10'
  {"t":0,"key":"alice","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}
  {"t":1,"key":"alice","n":1,"allowed":true,"remaining":0,"retry_after":0,"reset_after":10}
  {"t":2,"key":"alice","n":1,"allowed":false,"remaining":0,"retry_after":8,"reset_after":9}
  {"t":2,"key":"bob","n":1,"allowed":true,"remaining":1,"retry_after":0,"reset_after":10}

The exit status is 0 on success, 2 for a bad flag, policy, FILE or trace,
and 1 when the decisions cannot be written or the store fails.
`

// runSimulate is the simulate command.
func runSimulate(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed below
	policyText := fs.String("policy", "", "")
	storeURL := fs.String("store", "memory", "")
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "floodgate simulate: "+format+"\nRun 'floodgate simulate -h' for usage.\n", a...)
		return exitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, simulateUsage)
			return exitOK
		}
		return usageError("%v", err)
	}
	rest := fs.Args()
	switch {
	case len(rest) > 1 && strings.HasPrefix(rest[1], "-"):
		return usageError("too many arguments: %q (flags go before FILE)", rest[1:])
	case len(rest) > 1:
		return usageError("too many arguments: %q (want at most one FILE)", rest[1:])
	case *policyText == "":
		return usageError("--policy is required, such as --policy 'token-bucket 5/1s'")
	}
	policy, err := algo.ParsePolicy(*policyText)
	if err != nil {
		return usageError("%v", err)
	}
	in := stdin
	if len(rest) == 1 && rest[0] != "-" {
		f, err := os.Open(rest[0])
		if err != nil {
			fmt.Fprintf(stderr, "floodgate simulate: %v\n", err)
			return exitUsage
		}
		defer f.Close()
		in = f
	}
	tb, done, err := openSimulationStore(*storeURL, policy)
	if err != nil {
		return usageError("--store: %v", err)
	}
	err = simulate(tb, in, stdout)
	if cerr := done(); err == nil && cerr != nil {
		err = outputError{cerr}
	}
	if err != nil {
		fmt.Fprintf(stderr, "floodgate simulate: %v\n", err)
		if errors.As(err, new(outputError)) {
			return exitFailure
		}
		return exitUsage
	}
	return exitOK
}

// outputError is a failure to write the decisions, or any other failure
// that is not the input's fault.
type outputError struct{ error }

// openSimulationStore returns the table of the store named by rawURL in
// which a run keeps its keys' state under p, and a function that ends the
// run: it deletes a shared store's keys and closes the connection. Memory
// holds every key of the trace (no bound, no eviction); Redis decides at
// the trace's times, under a prefix of the run's own.
func openSimulationStore(rawURL string, p algo.Policy) (floodgate.Table, func() error, error) {
	var store floodgate.Store
	done := func() error { return nil }
	if rawURL == "memory" {
		store = floodgate.NewMemoryStore(math.MaxInt)
	} else {
		s, closer, err := storeurl.Open(rawURL, redisstore.WithCallerTime(), redisstore.WithMinTTL(time.Hour),
			redisstore.WithPrefix(fmt.Sprintf("floodgate:simulate:%016x:", rand.Uint64())))
		if err != nil {
			return nil, nil, err
		}
		store = s
		done = func() error {
			var err error
			if rs, ok := s.(*redisstore.Store); ok {
				err = rs.Clear(context.Background())
			}
			return errors.Join(err, closer.Close())
		}
	}
	tb, err := store.Table("simulate", p)
	if err != nil {
		done()
		return nil, nil, err
	}
	return tb, done, nil
}

// simulate replays the trace in in through tb, each key with its own state,
// and writes one decision per event to out. It flushes out whenever it is
// about to wait for input, and before it returns. An error in the trace is
// returned as it is, after the decisions for the events before it.
func simulate(tb floodgate.Table, in io.Reader, out io.Writer) error {
	ctx := context.Background()
	w := bufio.NewWriterSize(out, 64<<10)
	tr := trace.NewReader(flushingReader{in, w})
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
		line = appendDecision(line[:0], ev, d)
		if _, err := w.Write(line); err != nil {
			return outputError{err}
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
	b = trace.AppendSeconds(b, ev.T)
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
		b = trace.AppendSeconds(b, int64(d.RetryAfter))
	}
	b = append(b, `,"reset_after":`...)
	b = trace.AppendSeconds(b, int64(d.ResetAfter))
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
