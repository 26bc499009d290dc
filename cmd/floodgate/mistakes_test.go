package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mistakes are errors a newcomer makes, each with what floodgate answers:
// the first line of its standard error and its exit status. The table is
// the documentation of floodgate's messages: each names the setting, the
// value and what is expected, in the words of the help (never a Go type).
// In a config row, the file c.yaml holds yaml, and DIR is its directory.
var mistakes = []struct {
	mistake string
	env     []string // NAME=VALUE
	yaml    string   // the configuration file, for --config DIR/c.yaml
	args    []string
	code    int
	want    string
}{
	// Flags.
	{mistake: "a cost in words", args: check("--cost", "abc", "k"), code: 2,
		want: `floodgate check: --cost: "abc" is not a whole number`},
	{mistake: "a cost in hexadecimal", args: check("--cost", "0x5", "k"), code: 2,
		want: `floodgate check: --cost: "0x5" is not a whole number`},
	{mistake: "a fractional cost", args: check("--cost", "1.5", "k"), code: 2,
		want: `floodgate check: --cost: "1.5" is not a whole number`},
	{mistake: "a negative cost", args: check("--cost", "-1", "k"), code: 2,
		want: `floodgate check: --cost -1: a cost cannot be negative`},
	{mistake: "a mistyped flag", args: []string{"check", "--polcy", "token-bucket 5/1s", "k"}, code: 2,
		want: `floodgate check: unknown flag --polcy; did you mean --policy?`},
	{mistake: "a flag that does not exist", args: check("--verbose", "k"), code: 2,
		want: `floodgate check: unknown flag --verbose`},
	{mistake: "flags after the key", args: []string{"check", "k", "--policy", "token-bucket 5/1s"}, code: 2,
		want: `floodgate check: --policy comes after the KEY "k": flags go before it`},
	{mistake: "the last flag without its value", args: []string{"check", "--policy"}, code: 2,
		want: `floodgate check: --policy needs a value`},
	{mistake: "three dashes", args: []string{"check", "---policy", "token-bucket 5/1s", "k"}, code: 2,
		want: `floodgate check: "---policy" is not a flag: write --NAME or --NAME=VALUE`},
	{mistake: "a wait without a unit", args: check("--wait", "--max-wait", "5", "k"), code: 2,
		want: `floodgate check: --max-wait: "5" is not a duration; write it with a unit, e.g. 5ms or 5s`},
	{mistake: "a wait in words", args: check("--wait", "--max-wait", "5 minutes", "k"), code: 2,
		want: `floodgate check: --max-wait: "5 minutes" is not a duration; write a number and a unit (ns, us, ms, s, m, h), e.g. 500ms or 1m30s`},
	{mistake: "a yes for a switch", args: check("--wait=yes", "k"), code: 2,
		want: `floodgate check: --wait: "yes" is not true or false`},
	{mistake: "--max-wait without --wait", args: check("--max-wait", "5s", "k"), code: 2,
		want: `floodgate check: --max-wait needs --wait`},
	{mistake: "an algorithm without its dash", args: []string{"check", "--policy", "tokenbucket 5/1s", "k"}, code: 2,
		want: `floodgate check: --policy: invalid policy "tokenbucket 5/1s": unknown algorithm "tokenbucket" (want token-bucket, leaky-bucket, sliding-log, sliding-window or fixed-window)`},
	{mistake: "a period with an unknown unit", args: []string{"check", "--policy", "token-bucket 5/1x", "k"}, code: 2,
		want: `floodgate check: --policy: invalid policy "token-bucket 5/1x": period "1x" is not a Go duration (500ms, 1s, 1m, 1h) or a number of seconds`},
	{mistake: "no policy", args: []string{"check", "k"}, code: 2,
		want: `floodgate check: --policy POLICY KEY or at least one --limit KEY=POLICY is required`},
	{mistake: "a time in words", args: check("--now", "yesterday", "k"), code: 2,
		want: `floodgate check: --now: "yesterday" is neither Unix seconds nor an RFC 3339 time`},
	{mistake: "a mistyped command", args: []string{"chek"}, code: 2,
		want: `floodgate: unknown command "chek"; did you mean "check"?`},
	{mistake: "a mistyped client subcommand", args: []string{"client", "polices"}, code: 2,
		want: `floodgate client: unknown subcommand "polices"; did you mean "policies"?: want check, reset or policies`},
	{mistake: "a filter field by name", args: []string{"filter", "--policy", "token-bucket 5/1s", "--key-field", "host"}, code: 2,
		want: `floodgate filter: --key-field: "host" is not a whole number`},
	{mistake: "a filter delay without a unit", args: []string{"filter", "--policy", "token-bucket 5/1s", "--max-delay", "2"}, code: 2,
		want: `floodgate filter: --max-delay: "2" is not a duration; write it with a unit, e.g. 2ms or 2s`},
	{mistake: "a plot's key count in words", args: []string{"simulate", "--policy", "token-bucket 5/1s", "--plot", "p.svg", "--plot-keys", "four"}, code: 2,
		want: `floodgate simulate: --plot-keys: "four" is not a whole number`},
	{mistake: "serve's address flag mistyped", args: []string{"serve", "--htp", ":0"}, code: 2,
		want: `floodgate serve: unknown flag --htp; did you mean --http?`},
	{mistake: "a snapshot interval without a unit", args: []string{"serve", "--snapshot-interval", "10"}, code: 2,
		want: `floodgate serve: --snapshot-interval: "10" is not a duration; write it with a unit, e.g. 10ms or 10s`},
	{mistake: "a memory bound with a unit", args: []string{"serve", "--max-memory", "1GB"}, code: 2,
		want: `floodgate serve: --max-memory: "1GB" is not a whole number`},
	{mistake: "a log level of another tool", args: []string{"serve", "--log-level", "verbose"}, code: 2,
		want: `floodgate serve: --log-level "verbose": want debug, info, warn or error`},

	// Store URLs.
	{mistake: "one slash after redis:", args: check("--store", "redis:/localhost", "k"), code: 2,
		want: `floodgate check: --store: invalid store URL: "redis:/localhost": write a Redis server as redis://HOST:PORT[/DB], with two slashes`},
	{mistake: "an address without redis://", args: check("--store", "localhost:6379", "k"), code: 2,
		want: `floodgate check: --store: invalid store URL: "localhost:6379" has no scheme: for a Redis server, write redis://localhost:6379`},
	{mistake: "a unix socket with one slash", args: check("--store", "unix:/tmp/redis.sock", "k"), code: 2,
		want: `floodgate check: --store: invalid store URL: "unix:/tmp/redis.sock": write a unix socket as unix:///PATH (three slashes before an absolute PATH)`},
	{mistake: "a file store without its path", args: check("--store", "file:", "k"), code: 2,
		want: `floodgate check: --store: invalid store URL: "file:": no path: want file:PATH or file:///ABSOLUTE/PATH`},
	{mistake: "a store floodgate does not have", args: []string{"serve", "--store", "mongodb://db:27017", "--snapshot", "off", "--http", "127.0.0.1:0", "--metrics", "off"}, code: 2,
		want: `floodgate serve: --store: invalid store URL: "mongodb://db:27017": want memory, file:PATH, redis://HOST:PORT[/DB], unix:///PATH, redis-cluster://HOST:PORT[,HOST:PORT...] or redis-sentinel://MASTER@HOST:PORT[,...]`},

	// The environment.
	{mistake: "a variable mistyped", env: []string{"FLOODGATE_STOR=memory"}, args: []string{"version"}, code: 0,
		want: `floodgate: warning: $FLOODGATE_STOR is not a floodgate setting and is ignored; did you mean $FLOODGATE_STORE?`},
	{mistake: "a variable floodgate never reads", env: []string{"FLOODGATE_REDIS_URL=redis://r:6379"}, args: []string{"version"}, code: 0,
		want: `floodgate: warning: $FLOODGATE_REDIS_URL is not a floodgate setting and is ignored ('floodgate serve -h' lists them)`},
	{mistake: "a variable's duration without a unit", env: []string{"FLOODGATE_SHUTDOWN_TIMEOUT=30"}, args: []string{"serve"}, code: 2,
		want: `floodgate serve: $FLOODGATE_SHUTDOWN_TIMEOUT: "30" is not a duration; write it with a unit, e.g. 30ms or 30s`},

	// The configuration file.
	{mistake: "a field mistyped", yaml: "polices:\n  login: sliding-log 5/1m\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: unknown field "polices" (line 1); did you mean "policies"?`},
	{mistake: "a nested field mistyped", yaml: "store:\n  timout: 1s\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: unknown field "timout" in store (line 2); did you mean "timeout"?`},
	{mistake: "a field of another tool", yaml: "tls:\n  cert: server.crt\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: unknown field "cert" in tls (line 2); want one of cert_file, key_file, client_ca_file`},
	{mistake: "a duration without a unit", yaml: "store:\n  timeout: 100\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: store.timeout (line 2): "100" is not a duration; write it with a unit, e.g. 100ms or 100s`},
	{mistake: "a duration in words", yaml: "snapshot:\n  interval: ten seconds\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: snapshot.interval (line 2): "ten seconds" is not a duration; write a number and a unit (ns, us, ms, s, m, h), e.g. 500ms or 1m30s`},
	{mistake: "a number in words", yaml: "limits:\n  max_checks: lots\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: limits.max_checks (line 2): "lots" is not a whole number`},
	{mistake: "a fraction for a whole number", yaml: "limits:\n  max_checks: 1.5\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: limits.max_checks (line 2): "1.5" is not a whole number`},
	{mistake: "bytes with a unit", yaml: "store:\n  max_bytes: 256MB\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: store.max_bytes (line 2): "256MB" is not a whole number`},
	{mistake: "a switch that is neither", yaml: "ops:\n  auth: sometimes\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: ops.auth (line 2): "sometimes" is not true or false`},
	{mistake: "indented with a tab", yaml: "store:\n\ttimeout: 1s\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: not YAML: line 2: found character that cannot start any token (indent with spaces: YAML refuses tabs)`},
	{mistake: "a store URL where the store section goes", yaml: "store: redis://localhost:6379\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: store (line 1): want settings under it, one NAME: VALUE a line, got "redis://localhost:6379"`},
	{mistake: "a policy without its name", yaml: "policies: token-bucket 100/1m\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: policies (line 1): want one NAME: VALUE a line under it, got "token-bucket 100/1m"`},
	{mistake: "a policy as settings", yaml: "policies:\n  login:\n    rate: 5/1m\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: policies.login (line 3): want one value, got settings (NAME: VALUE)`},
	{mistake: "the policies given twice", yaml: "policies:\n  a: sliding-log 5/1m\npolicies:\n  b: sliding-log 5/1m\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: policies is given twice (lines 1 and 3)`},
	{mistake: "a policy that does not parse", yaml: "policies:\n  login: 5 per minute\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: policy "login": invalid policy "5 per minute": unknown algorithm "5" (want token-bucket, leaky-bucket, sliding-log, sliding-window or fixed-window)`},
	{mistake: "a policy name with a space", yaml: "policies:\n  per user: sliding-log 5/1m\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: policy name "per user": want 1 to 64 letters, digits and _.:/- starting with a letter or digit`},
	{mistake: "a failure mode of another tool", yaml: "store:\n  fail_mode: allow\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: store.fail_mode "allow": want closed, open or local`},
	{mistake: "a certificate without its key", yaml: "tls:\n  cert_file: server.crt\n", code: 2,
		want: `floodgate serve: DIR/c.yaml: invalid configuration: tls needs both cert_file and key_file`},
}

// check is the arguments of floodgate check with a policy, then args.
func check(args ...string) []string {
	return append([]string{"check", "--policy", "token-bucket 5/1s"}, args...)
}

// TestMistakes runs each mistake through the command, as a newcomer
// would, and checks floodgate's answer.
func TestMistakes(t *testing.T) {
	if len(mistakes) < 40 {
		t.Errorf("%d mistakes: the table documents at least 40", len(mistakes))
	}
	for _, clean := range append(serveEnvClean(), "FLOODGATE_SERVER=") {
		name, _, _ := strings.Cut(clean, "=")
		t.Setenv(name, "")
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, m := range mistakes {
		t.Run(m.mistake, func(t *testing.T) {
			for _, kv := range m.env {
				name, value, _ := strings.Cut(kv, "=")
				t.Setenv(name, value)
			}
			args, dir := m.args, t.TempDir()
			if m.yaml != "" {
				if err := os.WriteFile(filepath.Join(dir, "c.yaml"), []byte(m.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
				args = []string{"serve", "--config", filepath.Join(dir, "c.yaml"), "--snapshot", "off", "--http", "127.0.0.1:0", "--metrics", "off"}
			}
			var stdout, stderr strings.Builder
			code := run(args, strings.NewReader(""), &stdout, &stderr)
			first, _, _ := strings.Cut(strings.ReplaceAll(stderr.String(), dir, "DIR"), "\n")
			if code != m.code || first != m.want {
				t.Errorf("floodgate %q: exit %d, standard error:\n%s\nwant exit %d and first\n%s", args, code, stderr.String(), m.code, m.want)
			}
		})
	}
}
