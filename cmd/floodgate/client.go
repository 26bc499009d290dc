package main

import (
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
  --json              check: print the decision as the server's JSON;
                      policies: print the policies as JSON
  --ca-file FILE      trust the server certificate's CA in FILE (https)
  --cert-file FILE    with --key-file, present this client certificate
  --key-file FILE     (mutual TLS)
  --timeout D         give up after D (default 10s)
`

// runClient is the client command.
func runClient(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	usageError := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "floodgate client: "+format+"\nRun 'floodgate client -h' for usage.\n", a...)
		return exitUsage
	}
	if len(args) == 0 {
		return usageError("want a subcommand: check, reset or policies")
	}
	sub := args[0]
	switch sub {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, clientUsage)
		return exitOK
	case "check", "reset", "policies":
	default:
		return usageError("unknown subcommand %q: want check, reset or policies", sub)
	}
	fs := flag.NewFlagSet("client "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	server := fs.String("server", "", "")
	tokenFile := fs.String("token-file", "", "")
	policy := fs.String("policy", "", "")
	policyText := fs.String("policy-text", "", "")
	cost := fs.Int64("cost", 1, "")
	asJSON := fs.Bool("json", false, "")
	caFile := fs.String("ca-file", "", "")
	certFile := fs.String("cert-file", "", "")
	keyFile := fs.String("key-file", "", "")
	timeout := fs.Duration("timeout", 10*time.Second, "")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, clientUsage)
			return exitOK
		}
		return usageError("%v", err)
	}
	rest := fs.Args()
	if sub == "policies" {
		if len(rest) > 0 || *policy != "" || *policyText != "" {
			return usageError("policies takes no KEY and no policy")
		}
	} else {
		switch {
		case len(rest) != 1:
			return usageError("%s takes exactly one KEY argument, got %d (flags go before KEY)", sub, len(rest))
		case (*policy == "") == (*policyText == ""):
			return usageError("give --policy NAME or --policy-text POLICY")
		case *cost < 0:
			return usageError("--cost %d: a cost cannot be negative", *cost)
		}
	}
	if *timeout <= 0 {
		return usageError("--timeout %v: want a positive duration", *timeout)
	}
	c, err := newClient(*server, *tokenFile, *caFile, *certFile, *keyFile)
	if err != nil {
		return usageError("%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	failed := func(err error) int {
		fmt.Fprintf(stderr, "floodgate client %s: %v\n", sub, err)
		return exitUsage
	}

	switch sub {
	case "policies":
		ps, err := c.Policies(ctx)
		if err != nil {
			return failed(err)
		}
		if *asJSON {
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
			return exitOK
		}
		for _, p := range ps {
			fmt.Fprintf(stdout, "%s\t%s\n", p.Name, p.Policy)
		}
		return exitOK
	case "reset":
		if err := c.Reset(ctx, client.Check{Policy: *policy, PolicyText: *policyText, Key: rest[0]}); err != nil {
			return failed(err)
		}
		return exitOK
	}
	ch := client.Check{Policy: *policy, PolicyText: *policyText, Key: rest[0], Cost: *cost, Peek: *cost == 0}
	d, err := c.Decide(ctx, ch)
	if err != nil {
		return failed(err)
	}
	if *asJSON {
		b := []byte(`{"allowed":`)
		b = fmt.Appendf(b, "%t", d.Allowed)
		b = fmt.Appendf(b, `,"remaining":%d,"retry_after":`, d.Remaining)
		b = appendWait(b, d.RetryAfter)
		b = append(b, `,"reset_after":`...)
		b = appendWait(b, d.ResetAfter)
		fmt.Fprintf(stdout, "%s}\n", b)
	} else if !d.Allowed {
		fmt.Fprintln(stdout, seconds.Ceil(d.RetryAfter))
	}
	if !d.Allowed {
		return exitFailure
	}
	return exitOK
}

// newClient makes the client of the flags: the server's URL, a bearer
// token, and TLS settings.
func newClient(server, tokenFile, caFile, certFile, keyFile string) (*client.Client, error) {
	if server == "" {
		server = os.Getenv("FLOODGATE_SERVER")
	}
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	var opts []client.Option
	token := os.Getenv("FLOODGATE_TOKEN")
	if tokenFile != "" {
		data, err := os.ReadFile(tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = ""
		for line := range strings.Lines(string(data)) { // the first token, as the server reads them
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				token = line
				break
			}
		}
		if token == "" {
			return nil, fmt.Errorf("--token-file %s holds no token", tokenFile)
		}
	}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	if caFile != "" || certFile != "" || keyFile != "" {
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
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: tr}))
	}
	return client.New(server, opts...)
}
