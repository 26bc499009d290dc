package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/internal/seconds"
)

const clientUsage = `Usage: floodgate client check [flags] (--policy NAME | --policy-text P) KEY
       floodgate client reset [flags] (--policy NAME | --policy-text P) KEY
       floodgate client policies [flags]

Client asks a running floodgate serve, as floodgate check decides alone:

  floodgate client check --server http://127.0.0.1:8080 --policy login "$user" &&
      do_login "$user"

check decides one event on KEY under a policy of the server (--policy) or
one given inline (--policy-text), and spends its cost when admitted.
Exit status: 0 admitted; 1 limited, with the seconds to wait printed on
standard output (whole seconds, rounded up); 2 for a bad flag, a request
the server refuses (an unknown policy, a bad token) or a server that does
not answer or fails (a message on standard error).

With --max-wait D, check takes a place in KEY's queue instead of being
refused: when the server admits the event after a delay of at most D (the
units being held for it from then on), check sleeps the delay and exits
0, so that "&&" paces a loop to the policy's rate:

  tail -f jobs | while read -r job; do
      floodgate client check --max-wait 30s --policy api "$job" && run "$job"
  done

It exits 1 at once when the wait would pass D, or the server's
limits.max_wait (the key's queue is full). Token and leaky buckets queue;
under a window or log policy nothing is held, and check sleeps until the
next event would pass and asks again, while that fits in D.

reset forgets KEY's state under the policy (exit 0). policies prints the
server's policies, one a line: NAME, a tab, POLICY.

Flags:
  --server URL        the server (default $FLOODGATE_SERVER, else
                      http://127.0.0.1:8080)
  --token-file FILE   send the bearer token in FILE (default
                      $FLOODGATE_TOKEN, if set)
  --policy NAME       a policy of the server (see floodgate client policies)
  --policy-text P     an inline policy: ALGORITHM LIMIT/PERIOD [burst=B]
  --cost N            the event's cost (default 1; 0 only looks)
  --max-wait D        check: wait up to D (such as 500ms, 30s) for a turn,
                      then sleep it; default 0, no waiting
  --json              check: print the decision as the server's JSON
                      (with --max-wait, after the wait, with "delay": the
                      seconds waited in the queue);
                      policies: print the policies as JSON
  --ca-file FILE      trust the server certificate's CA in FILE (https)
  --cert-file FILE    with --key-file, present this client certificate
  --key-file FILE     (mutual TLS)
  --timeout D         give up after D (default 10s), plus --max-wait
`

// clientOptions is what client's subcommand, flags and arguments ask for.
type clientOptions struct {
	sub        string        // check, reset or policies
	server     string        // --server
	tokenFile  string        // --token-file
	policy     string        // --policy
	policyText string        // --policy-text
	cost       int64         // --cost
	maxWait    time.Duration // --max-wait
	asJSON     bool          // --json
	caFile     string        // --ca-file
	certFile   string        // --cert-file
	keyFile    string        // --key-file
	timeout    time.Duration // --timeout
	key        string        // KEY, for check and reset
}

// runClient is the client command.
func runClient(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	o, err := parseClientArgs(args)
	if err != nil {
		return badUsage("client", clientUsage, err, stdout, stderr)
	}
	c, err := o.newClient()
	if err != nil {
		return badUsage("client", clientUsage, err, stdout, stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout+o.maxWait)
	defer cancel()
	code := exitOK
	switch o.sub {
	case "policies":
		err = o.printPolicies(ctx, c, stdout)
	case "reset":
		err = c.Reset(ctx, client.Check{Policy: o.policy, PolicyText: o.policyText, Key: o.key})
	default:
		code, err = o.check(ctx, c, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "floodgate client %s: %v\n", o.sub, err)
		return exitUsage
	}
	return code
}

// parseClientArgs parses client's subcommand, flags and arguments, and
// validates them. A request for help is flag.ErrHelp.
func parseClientArgs(args []string) (*clientOptions, error) {
	if len(args) == 0 {
		return nil, errors.New("want a subcommand: check, reset or policies")
	}
	o := &clientOptions{sub: args[0]}
	switch o.sub {
	case "-h", "-help", "--help", "help":
		return nil, flag.ErrHelp
	case "check", "reset", "policies":
	default:
		return nil, fmt.Errorf("unknown subcommand %q%s: want check, reset or policies", o.sub, didYouMean(o.sub, []string{"check", "reset", "policies"}))
	}
	fs := flag.NewFlagSet("client "+o.sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and usage are printed by runClient
	fs.StringVar(&o.server, "server", "", "")
	fs.StringVar(&o.tokenFile, "token-file", "", "")
	fs.StringVar(&o.policy, "policy", "", "")
	fs.StringVar(&o.policyText, "policy-text", "", "")
	fs.Int64Var(&o.cost, "cost", 1, "")
	fs.DurationVar(&o.maxWait, "max-wait", 0, "")
	fs.BoolVar(&o.asJSON, "json", false, "")
	fs.StringVar(&o.caFile, "ca-file", "", "")
	fs.StringVar(&o.certFile, "cert-file", "", "")
	fs.StringVar(&o.keyFile, "key-file", "", "")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "")
	if err := parseFlags(fs, args[1:]); err != nil {
		return nil, err
	}
	if err := o.validate(fs.Args()); err != nil {
		return nil, err
	}
	return o, nil
}

// validate checks the flags and the arguments after them, rest, and sets
// the key.
func (o *clientOptions) validate(rest []string) error {
	if o.sub == "policies" {
		if len(rest) > 0 || o.policy != "" || o.policyText != "" {
			return errors.New("policies takes no KEY and no policy")
		}
	} else {
		switch {
		case len(rest) != 1:
			return fmt.Errorf("%s takes exactly one KEY argument, got %d (flags go before KEY)", o.sub, len(rest))
		case (o.policy == "") == (o.policyText == ""):
			return errors.New("give --policy NAME or --policy-text POLICY")
		case o.cost < 0:
			return fmt.Errorf("--cost %d: a cost cannot be negative", o.cost)
		case o.maxWait < 0:
			return fmt.Errorf("--max-wait %v: a wait cannot be negative", o.maxWait)
		case o.maxWait > 0 && o.sub != "check":
			return errors.New("--max-wait goes with check")
		}
		o.key = rest[0]
	}
	if o.timeout <= 0 {
		return fmt.Errorf("--timeout %v: want a positive duration", o.timeout)
	}
	return nil
}

// printPolicies prints the server's policies on stdout: one a line, the
// name and the policy separated by a tab, or with --json as a JSON array.
func (o *clientOptions) printPolicies(ctx context.Context, c *client.Client, stdout io.Writer) error {
	ps, err := c.Policies(ctx)
	if err != nil {
		return err
	}
	if !o.asJSON {
		for _, p := range ps {
			fmt.Fprintf(stdout, "%s\t%s\n", p.Name, p.Policy)
		}
		return nil
	}
	type policy struct {
		Name   string `json:"name"`
		Policy string `json:"policy"`
	}
	out := make([]policy, len(ps))
	for i, p := range ps {
		out[i] = policy{p.Name, p.Policy}
	}
	b, _ := json.Marshal(out)
	fmt.Fprintf(stdout, "%s\n", b)
	return nil
}

// check decides one event on the key, prints the decision as the flags
// ask, and returns the exit code: exitOK when admitted, exitFailure when
// limited.
func (o *clientOptions) check(ctx context.Context, c *client.Client, stdout io.Writer) (int, error) {
	ch := client.Check{Policy: o.policy, PolicyText: o.policyText, Key: o.key, Cost: o.cost, Peek: o.cost == 0, MaxWait: o.maxWait}
	d, err := c.Wait(ctx, ch) // without MaxWait, Decide
	if err != nil {
		return 0, err
	}
	if o.asJSON {
		b := appendClientDecision(nil, d)
		if o.maxWait > 0 {
			b = append(b[:len(b)-1], `,"delay":`...) // inside the object
			b = append(appendWait(b, d.Delay), '}')
		}
		fmt.Fprintf(stdout, "%s\n", b)
	} else if !d.Allowed {
		fmt.Fprintln(stdout, seconds.Ceil(d.RetryAfter))
	}
	if !d.Allowed {
		return exitFailure, nil
	}
	return exitOK, nil
}

// appendClientDecision appends the decision d as the JSON object client
// check --json prints.
func appendClientDecision(b []byte, d client.Decision) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"retry_after":`...)
	b = appendWait(b, d.RetryAfter)
	b = append(b, `,"reset_after":`...)
	b = appendWait(b, d.ResetAfter)
	return append(b, '}')
}

// newClient makes the client the flags ask for: the server (--server,
// else $FLOODGATE_SERVER, else http://127.0.0.1:8080), a bearer token
// (clientToken) and TLS settings (clientTLS).
func (o *clientOptions) newClient() (*client.Client, error) {
	server := cmp.Or(o.server, os.Getenv("FLOODGATE_SERVER"), "http://127.0.0.1:8080")
	opts := []client.Option{client.WithClock(wallClock)}
	token, err := clientToken(o.tokenFile)
	if err != nil {
		return nil, err
	}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	if o.caFile != "" || o.certFile != "" || o.keyFile != "" {
		tc, err := clientTLS(o.caFile, o.certFile, o.keyFile)
		if err != nil {
			return nil, err
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: tr}))
	}
	c, err := client.New(server, opts...)
	if err != nil && o.server == "" {
		return nil, fmt.Errorf("$FLOODGATE_SERVER: %w", err)
	}
	return c, err
}

// clientToken returns the bearer token: the first in tokenFile, as the
// server reads them (a line, trimmed, not empty and not starting with #),
// else $FLOODGATE_TOKEN; "" for none.
func clientToken(tokenFile string) (string, error) {
	if tokenFile == "" {
		return os.Getenv("FLOODGATE_TOKEN"), nil
	}
	data, err := os.ReadFile(tokenFile)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			return line, nil
		}
	}
	return "", fmt.Errorf("--token-file %s holds no token", tokenFile)
}

// clientTLS returns the TLS settings of --ca-file, the CA certificates
// that the client trusts ("" for the system's), and of --cert-file and
// --key-file, the client's certificate ("" for none).
func clientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return nil, errors.New("--cert-file and --key-file go together")
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
