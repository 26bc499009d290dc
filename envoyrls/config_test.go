package envoyrls

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// mustParse parses one file named test.yaml.
func mustParse(t testing.TB, yamlText string) *Config {
	t.Helper()
	c, err := ParseConfig(map[string][]byte{"test.yaml": []byte(yamlText)})
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	return c
}

// entries builds request entries from key, value pairs.
func entries(kv ...string) []*ratelimitv3.RateLimitDescriptor_Entry {
	var es []*ratelimitv3.RateLimitDescriptor_Entry
	for i := 0; i+1 < len(kv); i += 2 {
		es = append(es, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return es
}

// ruleFor returns the rule a descriptor of domain matches, or nil.
func ruleFor(t testing.TB, c *Config, domainName string, kv ...string) *rule {
	t.Helper()
	d := c.domains[domainName]
	if d == nil {
		t.Fatalf("no domain %q", domainName)
	}
	r, _ := d.lookup(entries(kv...))
	return r
}

const everyFeature = `
# Every feature of the format, and floodgate's additions.
domain: features
descriptors:
  - key: plain
    rate_limit:
      unit: second
      requests_per_unit: 10
  - key: plain
    value: special
    rate_limit: {unit: MINUTE, requests_per_unit: 5, name: special}
  - key: nested
    value: a
    descriptors:
      - key: inner
        rate_limit: {unit: hour, requests_per_unit: 7}
        shadow_mode: true
        detailed_metric: true
        value_to_metric: yes
  - key: open
    rate_limit:
      unlimited: true
      name: open
      replaces:
        - name: special
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: day, requests_per_unit: 3}
  - key: blocked
    rate_limit: {unit: week, requests_per_unit: 0}
  - key: monthly
    rate_limit: {unit: month, requests_per_unit: 1_000}
  - key: yearly
    rate_limit: {unit: year, requests_per_unit: 0x10}
  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: token-bucket, burst: 20}
  - key: leaky
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: leaky-bucket, capacity: 8}
  - key: log
    rate_limit: {unit: second, requests_per_unit: 4, algorithm: sliding-log}
  - key: window
    rate_limit: {unit: hour, requests_per_unit: 60, algorithm: sliding-window}
  - key: fixed
    rate_limit: {unit: hour, requests_per_unit: 60, algorithm: fixed-window}
  - key: placeholder
`

func TestParseConfigEveryFeature(t *testing.T) {
	c := mustParse(t, everyFeature)
	if got := c.Domains(); !slices.Equal(got, []string{"features"}) {
		t.Fatalf("Domains() = %v", got)
	}
	for _, tc := range []struct {
		entries   []string
		perUnit   uint32
		unit      rlsv3.RateLimitResponse_RateLimit_Unit
		period    time.Duration
		policy    string // "" for none
		upstream  bool
		name      string
		shadow    bool
		unlimited bool
		replaces  []string
	}{
		{entries: []string{"plain", "x"}, perUnit: 10, unit: rlsv3.RateLimitResponse_RateLimit_SECOND, period: time.Second, policy: "fixed-window 10/1s", upstream: true},
		{entries: []string{"plain", "special"}, perUnit: 5, unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, period: time.Minute, policy: "fixed-window 5/1m", upstream: true, name: "special"},
		{entries: []string{"nested", "a", "inner", "z"}, perUnit: 7, unit: rlsv3.RateLimitResponse_RateLimit_HOUR, period: time.Hour, policy: "fixed-window 7/1h", upstream: true, shadow: true},
		{entries: []string{"open", "x"}, unlimited: true, name: "open", replaces: []string{"special"}},
		{entries: []string{"path", "/files/a.txt"}, perUnit: 3, unit: rlsv3.RateLimitResponse_RateLimit_DAY, period: 24 * time.Hour, policy: "fixed-window 3/24h", upstream: true},
		{entries: []string{"blocked", "x"}, perUnit: 0, unit: rlsv3.RateLimitResponse_RateLimit_WEEK, period: 7 * 24 * time.Hour, upstream: true},
		{entries: []string{"monthly", "x"}, perUnit: 1000, unit: rlsv3.RateLimitResponse_RateLimit_MONTH, period: 30 * 24 * time.Hour, policy: "fixed-window 1000/720h", upstream: true},
		{entries: []string{"yearly", "x"}, perUnit: 16, unit: rlsv3.RateLimitResponse_RateLimit_YEAR, period: 365 * 24 * time.Hour, policy: "fixed-window 16/8760h", upstream: true},
		{entries: []string{"bucket", "x"}, perUnit: 100, unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, period: time.Minute, policy: "token-bucket 100/1m burst=20"},
		{entries: []string{"leaky", "x"}, perUnit: 2, unit: rlsv3.RateLimitResponse_RateLimit_SECOND, period: time.Second, policy: "leaky-bucket 2/1s capacity=8"},
		{entries: []string{"log", "x"}, perUnit: 4, unit: rlsv3.RateLimitResponse_RateLimit_SECOND, period: time.Second, policy: "sliding-log 4/1s"},
		{entries: []string{"window", "x"}, perUnit: 60, unit: rlsv3.RateLimitResponse_RateLimit_HOUR, period: time.Hour, policy: "sliding-window 60/1h"},
		{entries: []string{"fixed", "x"}, perUnit: 60, unit: rlsv3.RateLimitResponse_RateLimit_HOUR, period: time.Hour, policy: "fixed-window 60/1h", upstream: true},
	} {
		t.Run(strings.Join(tc.entries, "/"), func(t *testing.T) {
			r := ruleFor(t, c, "features", tc.entries...)
			if r == nil {
				t.Fatal("no rule")
			}
			if r.perUnit != tc.perUnit || r.unit != tc.unit || r.period != tc.period || r.policy.String() != tc.policy ||
				r.upstream != tc.upstream || r.name != tc.name || r.shadow != tc.shadow || r.unlimited != tc.unlimited ||
				!slices.Equal(r.replaces, tc.replaces) {
				t.Errorf("rule = {perUnit %d, unit %v, period %v, policy %q, upstream %v, name %q, shadow %v, unlimited %v, replaces %v}, want %+v",
					r.perUnit, r.unit, r.period, r.policy, r.upstream, r.name, r.shadow, r.unlimited, r.replaces, tc)
			}
			if r.domain != "features" || r.file != "test.yaml" || r.line == 0 {
				t.Errorf("rule's origin = %s %s:%d", r.domain, r.file, r.line)
			}
		})
	}
	if r := ruleFor(t, c, "features", "placeholder", "x"); r != nil {
		t.Errorf("a descriptor without rate_limit has rule %s", r.path)
	}
	if r := ruleFor(t, c, "features", "nested", "a"); r != nil {
		t.Errorf("a placeholder level has rule %s", r.path)
	}
}

// Every error ParseConfig reports, with the line it names.
func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"empty file", "", 0, "config file cannot have empty domain"},
		{"comment only", "# nothing\n", 0, "config file cannot have empty domain"},
		{"null document", "~\n", 1, "config file cannot have empty domain"},
		{"no domain", "descriptors: []\n", 1, "config file cannot have empty domain"},
		{"empty domain", "domain: ''\n", 1, "config file cannot have empty domain"},
		{"invalid YAML", "domain: [\n", 0, "invalid YAML"},
		{"two documents", "domain: a\n---\ndomain: b\n", 2, "more than one YAML document"},
		{"root is a list", "- domain: a\n", 1, "the file must be a mapping, not a list"},
		{"unknown root key", "domain: a\ndescriptor: []\n", 2, "unknown key 'descriptor' in the file (did you mean 'descriptors'?)"},
		{"unknown descriptor key", "domain: a\ndescriptors:\n  - key: k\n    shadowmode: true\n", 4, "unknown key 'shadowmode' in a descriptor (did you mean 'shadow_mode'?)"},
		{"unknown rate_limit key", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, request_per_unit: 1}\n", 4, "unknown key 'request_per_unit' in a rate_limit (did you mean 'requests_per_unit'?)"},
		{"misplaced key", "domain: a\ndescriptors:\n  - key: k\n    unit: second\n", 4, "unknown key 'unit' in a descriptor"},
		{"far-off key", "domain: a\nlimits: 3\n", 2, "unknown key 'limits' in the file"},
		{"non-string key", "domain: a\n? [x]\n: 1\n", 2, "key is not of type string"},
		{"duplicate key", "domain: a\ndomain: b\n", 2, "key 'domain' given twice in the file (first at line 1)"},
		{"domain is a list", "domain: [a]\n", 1, "domain must be a string, not a list"},
		{"descriptors not a list", "domain: a\ndescriptors: {key: k}\n", 2, "descriptors must be a list, not a mapping"},
		{"descriptor not a mapping", "domain: a\ndescriptors:\n  - k\n", 3, `a descriptor must be a mapping, not "k"`},
		{"empty key", "domain: a\ndescriptors:\n  - value: v\n", 3, "descriptor has empty key"},
		{"duplicate descriptor", "domain: a\ndescriptors:\n  - key: k\n  - key: j\n  - key: k\n", 5, "duplicate descriptor composite key 'a.k' (first at line 3)"},
		{"duplicate descriptor with value", "domain: a\ndescriptors:\n  - key: k\n    value: v\n  - key: k\n    value: v\n", 5, "duplicate descriptor composite key 'a.k_v'"},
		{"duplicate nested descriptor", "domain: a\ndescriptors:\n  - key: k\n    descriptors:\n      - key: j\n      - key: j\n", 6, "duplicate descriptor composite key 'a.k.j'"},
		{"missing unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 1}\n", 4, "invalid rate limit unit ''"},
		{"bad unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n", 5, "invalid rate limit unit 'fortnight'"},
		{"unknown unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: unknown, requests_per_unit: 1}\n", 4, "invalid rate limit unit 'unknown'"},
		{"unit with unlimited", "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unlimited: true\n      unit: second\n", 6, "should not specify rate limit unit when unlimited"},
		{"algorithm with unlimited", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, algorithm: token-bucket}\n", 4, "an unlimited rate_limit takes no algorithm"},
		{"negative requests_per_unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n", 4, "requests_per_unit -1 is not an unsigned 32-bit integer"},
		{"requests_per_unit past uint32", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n", 4, "is not an unsigned 32-bit integer"},
		{"requests_per_unit not a number", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: many}\n", 4, `requests_per_unit must be an integer, not "many"`},
		{"quoted requests_per_unit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: \"5\"}\n", 4, "requests_per_unit must be an integer"},
		{"bad boolean", "domain: a\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n", 4, `shadow_mode must be true or false, not "maybe"`},
		{"quoted boolean", "domain: a\ndescriptors:\n  - key: k\n    shadow_mode: 'true'\n", 4, "shadow_mode must be true or false"},
		{"bad detailed_metric", "domain: a\ndescriptors:\n  - key: k\n    detailed_metric: [x]\n", 4, "detailed_metric must be true or false, not a list"},
		{"empty replaces entry", "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      replaces:\n        - name: ''\n", 5, "should not have an empty replaces entry"},
		{"self replaces", "domain: a\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      name: me\n      replaces: [{name: me}]\n", 5, "replaces should not contain name of same descriptor"},
		{"replaces not a list", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: {name: x}}\n", 4, "replaces must be a list"},
		{"unknown replaces key", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{nam: x}]}\n", 4, "unknown key 'nam' in a replaces entry (did you mean 'name'?)"},
		{"share_threshold without wildcard", "domain: a\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n", 3, "share_threshold can only be used with wildcard values"},
		{"unknown algorithm", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra}\n", 4, `unknown algorithm "gcra"`},
		{"burst on a window", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 5}\n", 4, "fixed-window takes no burst or capacity"},
		{"burst and capacity", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token-bucket, burst: 5, capacity: 5}\n", 4, "burst and capacity are the same setting"},
		{"negative burst", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token-bucket, burst: -5}\n", 4, "burst -5 is negative"},
		{"burst draining for centuries", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 1, algorithm: token-bucket, burst: 1000}\n", 4, "years to drain; the most is 100"},
		{"burst with a zero limit", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 0, algorithm: token-bucket, burst: 5}\n", 4, "requests_per_unit 0 blocks everything and takes no burst"},
		{"metadata not a mapping", "domain: a\ndescriptors:\n  - key: k\n    metadata: [x]\n", 4, "metadata must be a mapping, not a list"},
		{"bad quota_mode", "domain: a\ndescriptors:\n  - key: k\n    quota_mode: sometimes\n", 4, `quota_mode must be true or false, not "sometimes"`},
		{"merge of a scalar", "domain: a\ndescriptors:\n  - key: k\n    <<: 5\n", 4, "a merge key (<<) takes a mapping"},
		{"unknown key with an anchor", "x: &x {shadowmode: true}\n", 1, "unknown key 'x' in the file"},
		{"billion laughs", laughs(), 0, "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(map[string][]byte{"bad.yaml": []byte(tc.yaml)})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			ce, ok := errors.AsType[*ConfigError](err)
			if !ok {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if ce.File != "bad.yaml" || (tc.line != 0 && ce.Line != tc.line) || !strings.Contains(ce.Problem, tc.want) {
				t.Errorf("error = %q (file %s, line %d), want %q at line %d", err, ce.File, ce.Line, tc.want, tc.line)
			}
			if !strings.HasPrefix(err.Error(), "envoyrls: bad.yaml:") {
				t.Errorf("error %q does not begin with the file's name", err)
			}
		})
	}
}

// laughs is a YAML bomb, in keys the format allows: nine levels of ten
// aliases each, a billion descriptors once expanded.
func laughs() string {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := range 10 {
		fmt.Fprintf(&b, "  - key: z%d\n    descriptors: &a%d [", i, i)
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			if i == 0 {
				fmt.Fprintf(&b, "{key: k%d}", j)
			} else {
				fmt.Fprintf(&b, "{key: k%d, descriptors: *a%d}", j, i-1)
			}
		}
		b.WriteString("]\n")
	}
	return b.String()
}

func TestParseConfigDuplicateDomain(t *testing.T) {
	_, err := ParseConfig(map[string][]byte{
		"b.yaml": []byte("domain: shared\n"),
		"a.yaml": []byte("domain: shared\n"),
		"c.yaml": []byte("domain: other\n"),
	})
	ce, ok := errors.AsType[*ConfigError](err)
	if !ok || ce.File != "b.yaml" || !strings.Contains(ce.Problem, `duplicate domain "shared", also in a.yaml`) {
		t.Fatalf("err = %v, want b.yaml's duplicate of a.yaml's domain", err)
	}
}

// Every file is checked, and their errors joined in the order of the names.
func TestParseConfigSeveralErrors(t *testing.T) {
	_, err := ParseConfig(map[string][]byte{
		"z.yaml": []byte("domain: z\nbad: 1\n"),
		"a.yaml": []byte("domain: ''\n"),
		"m.yaml": []byte("domain: fine\n"),
	})
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	a, z := strings.Index(msg, "a.yaml"), strings.Index(msg, "z.yaml")
	if a < 0 || z < 0 || a > z || strings.Contains(msg, "m.yaml") {
		t.Errorf("error = %q, want a.yaml's then z.yaml's", msg)
	}
}

// YAML as upstream's library (yaml.v2) reads it.
func TestParseConfigYAMLCompatibility(t *testing.T) {
	c := mustParse(t, `
domain: compat
descriptors:
  - key: port
    value: 80              # an integer, read as the string "80"
    rate_limit: &perSecond {unit: second, requests_per_unit: 3}
  - key: flag
    value: true            # a boolean, read as the string "true"
    rate_limit:
      <<: *perSecond
      requests_per_unit: 0o17
  - key: shadowed
    shadow_mode: yes
    rate_limit: {<<: [*perSecond], name: ~}
  - key: off               # a key read as a string too
    shadow_mode: Off
    rate_limit: {unit: Second, requests_per_unit: 0b101}
  - key: empty
    descriptors: ~
    rate_limit: ~
`)
	for _, tc := range []struct {
		entries []string
		perUnit uint32
		shadow  bool
	}{
		{[]string{"port", "80"}, 3, false},
		{[]string{"flag", "true"}, 15, false},
		{[]string{"shadowed", "x"}, 3, true},
		{[]string{"off", "x"}, 5, false},
	} {
		r := ruleFor(t, c, "compat", tc.entries...)
		if r == nil || r.perUnit != tc.perUnit || r.shadow != tc.shadow || r.unit != rlsv3.RateLimitResponse_RateLimit_SECOND {
			t.Errorf("%v: rule %+v, want %d a second, shadow %v", tc.entries, r, tc.perUnit, tc.shadow)
		}
	}
	if r := ruleFor(t, c, "compat", "empty", "x"); r != nil {
		t.Errorf("rate_limit: ~ gave rule %s", r.path)
	}
}

func TestLoadConfig(t *testing.T) {
	write := func(t *testing.T, path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("the config directory", func(t *testing.T) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "a.yaml"), "domain: a\n")
		write(t, filepath.Join(dir, "b.yml"), "domain: b\n")
		write(t, filepath.Join(dir, ".hidden.yaml"), "domain: hidden\n")
		write(t, filepath.Join(dir, "notes.txt"), "not yaml")
		write(t, filepath.Join(dir, "a.yaml.swp"), "not yaml")
		write(t, filepath.Join(dir, "sub", "c.yaml"), "domain: nested\n")
		write(t, filepath.Join(dir, "sub", "deeper", "d.yaml"), "domain: deeper\n")
		write(t, filepath.Join(dir, ".git", "e.yaml"), "domain: dot-directory\n")
		c, err := LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Domains(); !slices.Equal(got, []string{"a", "b", "deeper", "nested"}) {
			t.Errorf("Domains() = %v, want [a b deeper nested]", got)
		}
		// Each file upstream would read, and LoadConfig did not, warned.
		var warned []string
		for _, w := range c.Warnings() {
			warned = append(warned, strings.TrimPrefix(strings.Fields(w)[0], dir+string(filepath.Separator)))
		}
		if want := []string{".hidden.yaml", "a.yaml.swp", "notes.txt"}; !slices.Equal(warned, want) {
			t.Errorf("Warnings() = %q, want one for each of %q", c.Warnings(), want)
		}
	})
	t.Run("upstream's runtime layout", func(t *testing.T) {
		root := t.TempDir() // RUNTIME_ROOT/RUNTIME_SUBDIRECTORY
		write(t, filepath.Join(root, "config", "edge.yaml"), "domain: edge\n")
		c, err := LoadConfig(root)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Domains(); !slices.Equal(got, []string{"edge"}) {
			t.Errorf("Domains() = %v, want [edge]", got)
		}
	})
	t.Run("a Kubernetes ConfigMap", func(t *testing.T) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "..2026_11_22", "edge.yaml"), "domain: edge\n")
		if err := os.Symlink("..2026_11_22", filepath.Join(dir, "..data")); err != nil {
			t.Skip("no symbolic links here:", err)
		}
		if err := os.Symlink(filepath.Join("..data", "edge.yaml"), filepath.Join(dir, "edge.yaml")); err != nil {
			t.Fatal(err)
		}
		c, err := LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Domains(); !slices.Equal(got, []string{"edge"}) {
			t.Errorf("Domains() = %v, want [edge]", got)
		}
	})
	t.Run("an empty directory", func(t *testing.T) {
		c, err := LoadConfig(t.TempDir())
		if err != nil || len(c.Domains()) != 0 {
			t.Errorf("LoadConfig = %v, %v; want no domain, no error", c.Domains(), err)
		}
	})
	t.Run("a missing directory", func(t *testing.T) {
		_, err := LoadConfig(filepath.Join(t.TempDir(), "missing"))
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("err = %v, want one wrapping os.ErrNotExist", err)
		}
	})
	t.Run("an invalid file", func(t *testing.T) {
		dir := t.TempDir()
		write(t, filepath.Join(dir, "bad.yaml"), "domain: x\nbogus: 1\n")
		_, err := LoadConfig(dir)
		ce, ok := errors.AsType[*ConfigError](err)
		if !ok || ce.File != filepath.Join(dir, "bad.yaml") || ce.Line != 2 {
			t.Errorf("err = %v, want a ConfigError for line 2 of %s", err, filepath.Join(dir, "bad.yaml"))
		}
	})
	t.Run("the examples", func(t *testing.T) {
		c, err := LoadConfig(filepath.Join("testdata", "upstream"))
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Domains()) == 0 {
			t.Error("no domain")
		}
	})
}

func TestDomainsOfNothing(t *testing.T) {
	var c *Config
	if got := c.Domains(); got != nil {
		t.Errorf("nil Config's Domains() = %v", got)
	}
	if got := (&Config{}).Domains(); len(got) != 0 {
		t.Errorf("zero Config's Domains() = %v", got)
	}
	c, err := ParseConfig(nil)
	if err != nil || len(c.Domains()) != 0 {
		t.Errorf("ParseConfig(nil) = %v, %v", c.Domains(), err)
	}
}

// A rule's policy is floodgate's: the tables of equal rules are equal.
func TestRulePolicies(t *testing.T) {
	c := mustParse(t, everyFeature)
	if r := ruleFor(t, c, "features", "bucket", "x"); r.policy != algo.MustParsePolicy("token-bucket 100/1m burst=20") {
		t.Errorf("policy = %v", r.policy)
	}
}

// A Service logs its configuration's warnings, at level Warn, when it
// is given it.
func TestServiceLogsConfigWarnings(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{"a.yaml": "domain: a\n", "b.conf": "domain: b\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	s := NewService(c, nil, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	s.SetConfig(c)
	if got := strings.Count(buf.String(), "level=WARN"); got != 2 || !strings.Contains(buf.String(), "b.conf skipped") {
		t.Errorf("logged %d warnings, want 2 naming b.conf:\n%s", got, buf.String())
	}
}
