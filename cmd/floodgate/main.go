// Command floodgate works with floodgate's rate-limiting policies from the
// shell.
//
// Usage:
//
//	floodgate COMMAND [ARGUMENTS]
//
// The commands are:
//
//	check      decide one event for a shell script (exit status 0 or 1)
//	client     ask a running floodgate serve (check, reset, policies)
//	filter     pass the lines of standard input that a limit admits
//	serve      run the rate-limit service (HTTP JSON, Envoy's gRPC, metrics)
//	simulate   replay a trace through a policy with simulated time
//	version    print floodgate's version
//
// Run "floodgate COMMAND -h" for a command's usage.
//
// simulate --plot draws with gonum.org/v1/plot, which only a build with
// the plot tag links (make build does; go install -tags plot): a plain go
// build, go run and the container image leave it out, and are the lighter.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/floodgate/floodgate/internal/suggest"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the work failed, such as writing the output
	exitUsage   = 2 // bad arguments or bad input
)

// command is one subcommand: run gets the arguments after its name and
// returns the exit code.
type command struct {
	name, summary string
	run           func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

var commands = []command{
	{"check", "decide one event for a shell script (exit status 0 or 1)", runCheck},
	{"client", "ask a running floodgate serve (check, reset, policies)", runClient},
	{"filter", "pass the lines of standard input that a limit admits", runFilter},
	{"serve", "run the rate-limit service (HTTP JSON, Envoy's gRPC, metrics)", runServe},
	{"simulate", "replay a trace through a policy with simulated time", runSimulate},
	{"version", "print floodgate's version", runVersion},
}

// run runs the floodgate command line args and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	warnUnknownEnv(stderr)
	routeRedisLog() // serve routes it to its log instead
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	switch args[0] {
	case "--version":
		return runVersion(nil, stdin, stdout, stderr)
	case "help", "-h", "-help", "--help":
		if args[0] == "help" && len(args) > 1 {
			return run([]string{args[1], "-h"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage())
		return exitOK
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:], stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "floodgate: unknown command %q%s\n\n%s", args[0], didYouMean(args[0], commandNames()), usage())
	return exitUsage
}

// commandNames returns the names of the commands.
func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

// didYouMean returns "; did you mean "NAME"?" with the name of known
// closest to name, or "" when none is close.
func didYouMean(name string, known []string) string {
	if s := suggest.Closest(name, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

func usage() string {
	var b strings.Builder
	b.WriteString("Usage: floodgate COMMAND [ARGUMENTS]\n\nCommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %-10s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'floodgate COMMAND -h' for a command's usage.\n")
	return b.String()
}

// usageError is a mistake in a command's arguments found after its flags
// were parsed, such as a store URL that cannot be opened: the command
// reports it as badUsage does.
type usageError struct{ error }

// usagef returns a usageError whose message is format with a.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// badUsage reports err, a mistake in the arguments of the command name,
// and returns the exit code. For flag.ErrHelp (-h) it writes the command's
// usage on stdout and returns exitOK; otherwise it writes err on stderr
// with where to find the usage, and returns exitUsage.
func badUsage(name, usage string, err error, stdout, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "floodgate %s: %v\nRun 'floodgate %s -h' for usage.\n", name, err, name)
	return exitUsage
}

// givenFlags returns the names of the flags of fs given on the command
// line.
func givenFlags(fs *flag.FlagSet) map[string]bool {
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
