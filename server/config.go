package server

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate/failsafe"

	"go.yaml.in/yaml/v3"
)

// ErrInvalidConfig is returned, wrapped with the problem, by ParseConfig,
// LoadConfig, New and Server.SetConfig for a configuration that cannot
// be served.
var ErrInvalidConfig = errors.New("invalid configuration")

// DefaultPolicyName and DefaultPolicy are the policy served when the
// configuration names none, as on a first run with no configuration.
const (
	DefaultPolicyName = "default"
	DefaultPolicy     = "token-bucket 100/1m burst=20"
)

// The defaults of Limits.
const (
	DefaultMaxBodyBytes      = 1 << 20
	DefaultMaxChecks         = 1000
	DefaultMaxKeyBytes       = 1024
	DefaultMaxInlinePolicies = 100
	DefaultMaxWait           = time.Minute
)

// The defaults of the snapshot and the store's failure handling.
const (
	DefaultSnapshotInterval = 10 * time.Second
	DefaultStoreTimeout     = 100 * time.Millisecond // Redis
	DefaultFileStoreTimeout = time.Second            // file:, whose calls wait for fsync
)

// Config is floodgate serve's configuration file, in YAML:
//
//	policies:                       # name: policy; none means the built-in
//	  default: token-bucket 100/1m burst=20   # "default" alone
//	  login: sliding-log 5/1m
//	limits:
//	  max_body_bytes: 1048576       # a request's body, in bytes (nested at most 16 deep)
//	  max_checks: 1000              # checks in one batch
//	  max_key_bytes: 1024           # a key's length, in bytes
//	  inline_policies: true         # may requests give policy_text?
//	  max_inline_policies: 100      # distinct policy_text values served
//	  max_wait: 1m                  # the longest delay a check's max_wait gets
//	auth:
//	  token_file: /etc/floodgate/token   # one bearer token a line; refused if group- or world-writable
//	tls:
//	  cert_file: server.crt
//	  key_file: server.key
//	  client_ca_file: clients.crt   # optional: mutual TLS
//	store:
//	  fail_mode: closed             # closed, open or local, while the store fails
//	  timeout: 100ms                # each call to a shared store (file: 1s)
//	  threshold: 5                  # failures in a row that take it down,
//	  fail_for: 250ms               # over at least this long (0: any)
//	  cooldown: 500ms               # then a probe after each cooldown
//	  max_keys: 1048576             # per policy, in the memory store
//	snapshot:                       # the memory store's snapshot
//	  file: /var/lib/floodgate/snapshot
//	  interval: 10s                 # and at shutdown; 0: only at shutdown
//	ops:                            # the operations endpoints (--metrics)
//	  auth: true                    # /metrics and /debug/pprof want a token of auth
//	  tls: true                     # served with the certificates of tls; /healthz and
//	                                # /readyz take no client certificate (kubelet probes)
//
// Every field may be left out: the zero value of each means its default.
// Relative file names are relative to the configuration file's directory.
// The configuration file, the token file and the TLS key are refused when
// their group or others may write them (mode bits 022), as ssh refuses an
// unprotected key.
// Unknown fields are an error (with the closest known field), as is a
// value of the wrong kind, such as a duration without its unit or a
// fraction for a whole number; the error names the setting and its line.
// Only policies, limits, auth and the TLS
// certificates take effect on a reload; the store and snapshot settings,
// and turning TLS on or off, take a restart.
type Config struct {
	Policies map[string]string `yaml:"policies"`
	Limits   LimitsConfig      `yaml:"limits"`
	Auth     AuthConfig        `yaml:"auth"`
	TLS      TLSConfig         `yaml:"tls"`
	Store    StoreConfig       `yaml:"store"`
	Snapshot SnapshotConfig    `yaml:"snapshot"`
	Ops      OpsConfig         `yaml:"ops"`

	dir string // the configuration file's directory, for relative names
}

// LimitsConfig bounds what one request may ask. The zero value of each
// field means its default (DefaultMaxBodyBytes and the others).
type LimitsConfig struct {
	MaxBodyBytes      int64 `yaml:"max_body_bytes"`
	MaxChecks         int   `yaml:"max_checks"`
	MaxKeyBytes       int   `yaml:"max_key_bytes"`
	InlinePolicies    *bool `yaml:"inline_policies"`
	MaxInlinePolicies int   `yaml:"max_inline_policies"`
	// MaxWait bounds the max_wait of a check (see Server.Handler): the
	// longest delay the service gives, and so the depth of each key's
	// queue (MaxWait × the policy's rate). 0 means DefaultMaxWait.
	MaxWait time.Duration `yaml:"max_wait"`
}

// AuthConfig turns on bearer-token authentication of both APIs: a request
// must carry "Authorization: Bearer TOKEN" with one of the tokens of
// TokenFile (one a line; blank lines and lines starting with # are
// skipped, so that a new token can be added before the old one is
// removed). Without a TokenFile, the token given to New (WithToken, from
// $FLOODGATE_TOKEN) is the one; with neither, there is no authentication.
type AuthConfig struct {
	TokenFile string `yaml:"token_file"`
}

// TLSConfig serves both APIs over TLS when CertFile and KeyFile are set;
// with ClientCAFile, clients must present a certificate signed by one of
// its CAs (mutual TLS).
type TLSConfig struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// StoreConfig says how the service uses its store.
type StoreConfig struct {
	// FailMode is what a shared store (file, Redis) does while it fails:
	// "closed" (the default: deny, and answer 503), "open" (admit) or
	// "local" (decide in this process's memory); see failsafe.Mode.
	FailMode string `yaml:"fail_mode"`
	// Timeout bounds each call to a shared store: a call that takes
	// longer fails (and the failure mode decides). 0 means
	// DefaultStoreTimeout, or DefaultFileStoreTimeout for a file store.
	Timeout time.Duration `yaml:"timeout"`
	// Threshold is how many calls in a row must fail, with no success in
	// between, before the store (a Redis Cluster's hash slot) is taken
	// to be down and decided by the failure mode without being called;
	// 0 means 5. Until then each failed call alone is decided by the
	// mode. See failsafe.Options.
	Threshold int `yaml:"threshold"`
	// FailFor is how long, from the first failure of such a run to the
	// last, calls must have been failing too, so that one short stall
	// takes nothing down: absent means 250ms, 0 no minimum.
	FailFor *time.Duration `yaml:"fail_for"`
	// Cooldown is how long the store is left alone once down before a
	// call probes it, and between probes; 0 means 500ms, so that the
	// store is used again within half a second of answering again.
	Cooldown time.Duration `yaml:"cooldown"`
	// MaxKeys bounds the keys per policy of the memory store; 0 means
	// memstore.DefaultMaxKeys.
	MaxKeys int `yaml:"max_keys"`
	// MaxBytes bounds the memory store's memory, all tables together
	// (and the failsafe's local store's); 0 means memstore.DefaultMaxBytes
	// (256 MiB). The --max-memory flag takes precedence.
	MaxBytes int64 `yaml:"max_bytes"`
}

// OpsConfig protects the operations endpoints (serve's --metrics address):
// Auth asks the API's bearer tokens (AuthConfig) of /metrics and
// /debug/pprof, and TLS serves them all with the API's certificates
// (TLSConfig, client CA included). /healthz and /readyz stay open to
// probes without a token: they tell only whether the process serves.
type OpsConfig struct {
	Auth bool `yaml:"auth"`
	TLS  bool `yaml:"tls"`
}

// SnapshotConfig says where and how often the memory store's state is
// saved. The command-line flags --snapshot and --snapshot-interval take
// precedence.
type SnapshotConfig struct {
	File string `yaml:"file"`
	// Interval is how often the snapshot is written, besides at
	// shutdown: absent means DefaultSnapshotInterval, 0 only at shutdown.
	Interval *time.Duration `yaml:"interval"`
}

// ParseConfig reads a configuration from YAML; dir is the directory that
// relative file names are relative to. It checks the policies and limits,
// but does not read the files the configuration names: New and SetConfig
// do.
func ParseConfig(data []byte, dir string) (*Config, error) {
	if err := checkYAML(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	c := &Config{}
	// An empty document (io.EOF) is the default configuration.
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	c.dir = dir
	if _, err := c.policies(); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

// LoadConfig reads the configuration file at path (see Config).
func LoadConfig(path string) (*Config, error) {
	if err := checkWritable("the configuration file", path); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	c, err := ParseConfig(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// DefaultConfig returns the configuration of a run without a configuration
// file: the policy "default" and every default.
func DefaultConfig() *Config { return &Config{} }

// maxNameLen bounds a policy's name.
const maxNameLen = 64

// validName reports whether name may name a policy: 1 to 64 letters,
// digits and _ . : / -, starting with a letter or digit. (Names starting
// with envoyrls/ are the Envoy service's, refused too.)
func validName(name string) bool {
	if name == "" || len(name) > maxNameLen {
		return false
	}
	for i, c := range []byte(name) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case i > 0 && strings.IndexByte("_.:/-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// namedPolicy is a policy of the configuration.
type namedPolicy struct {
	name   string
	policy algo.Policy
}

// policies returns the configuration's policies, sorted by name: the
// built-in default when it has none.
func (c *Config) policies() ([]namedPolicy, error) {
	if len(c.Policies) == 0 {
		return []namedPolicy{{DefaultPolicyName, algo.MustParsePolicy(DefaultPolicy)}}, nil
	}
	out := make([]namedPolicy, 0, len(c.Policies))
	for name, text := range c.Policies {
		if !validName(name) || strings.HasPrefix(name, "envoyrls/") {
			return nil, fmt.Errorf("%w: policy name %q: want 1 to %d letters, digits and _.:/- starting with a letter or digit", ErrInvalidConfig, name, maxNameLen)
		}
		p, err := algo.ParsePolicy(text)
		if err != nil {
			return nil, fmt.Errorf("%w: policy %q: %w", ErrInvalidConfig, name, err)
		}
		out = append(out, namedPolicy{name, p})
	}
	slices.SortFunc(out, func(a, b namedPolicy) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// policies0 is policies without the error, which ParseConfig has checked.
func (c *Config) policies0() []namedPolicy {
	nps, _ := c.policies()
	return nps
}

// check checks the configuration's numbers and names.
func (c *Config) check() error {
	l := c.Limits
	switch {
	case l.MaxBodyBytes < 0:
		return fmt.Errorf("%w: limits.max_body_bytes %d is negative", ErrInvalidConfig, l.MaxBodyBytes)
	case l.MaxChecks < 0:
		return fmt.Errorf("%w: limits.max_checks %d is negative", ErrInvalidConfig, l.MaxChecks)
	case l.MaxKeyBytes < 0:
		return fmt.Errorf("%w: limits.max_key_bytes %d is negative", ErrInvalidConfig, l.MaxKeyBytes)
	case l.MaxInlinePolicies < 0:
		return fmt.Errorf("%w: limits.max_inline_policies %d is negative", ErrInvalidConfig, l.MaxInlinePolicies)
	case l.MaxWait < 0:
		return fmt.Errorf("%w: limits.max_wait %v is negative", ErrInvalidConfig, l.MaxWait)
	case c.Store.Timeout < 0:
		return fmt.Errorf("%w: store.timeout %v is negative", ErrInvalidConfig, c.Store.Timeout)
	case c.Store.Threshold < 0:
		return fmt.Errorf("%w: store.threshold %d is negative", ErrInvalidConfig, c.Store.Threshold)
	case c.Store.FailFor != nil && *c.Store.FailFor < 0:
		return fmt.Errorf("%w: store.fail_for %v is negative", ErrInvalidConfig, *c.Store.FailFor)
	case c.Store.Cooldown < 0:
		return fmt.Errorf("%w: store.cooldown %v is negative", ErrInvalidConfig, c.Store.Cooldown)
	case c.Store.MaxKeys < 0:
		return fmt.Errorf("%w: store.max_keys %d is negative", ErrInvalidConfig, c.Store.MaxKeys)
	case c.Store.MaxBytes < 0:
		return fmt.Errorf("%w: store.max_bytes %d is negative", ErrInvalidConfig, c.Store.MaxBytes)
	case c.Snapshot.Interval != nil && *c.Snapshot.Interval < 0:
		return fmt.Errorf("%w: snapshot.interval %v is negative", ErrInvalidConfig, *c.Snapshot.Interval)
	case (c.TLS.CertFile == "") != (c.TLS.KeyFile == ""):
		return fmt.Errorf("%w: tls needs both cert_file and key_file", ErrInvalidConfig)
	case c.TLS.ClientCAFile != "" && c.TLS.CertFile == "":
		return fmt.Errorf("%w: tls.client_ca_file needs cert_file and key_file", ErrInvalidConfig)
	case c.Ops.TLS && c.TLS.CertFile == "":
		return fmt.Errorf("%w: ops.tls needs the certificates of tls (cert_file and key_file)", ErrInvalidConfig)
	}
	if _, err := c.failMode(); err != nil {
		return err
	}
	return nil
}

// failMode returns the store's failure mode.
func (c *Config) failMode() (failsafe.Mode, error) {
	switch c.Store.FailMode {
	case "", "closed":
		return failsafe.FailClosed, nil
	case "open":
		return failsafe.FailOpen, nil
	case "local":
		return failsafe.FailLocal, nil
	}
	return 0, fmt.Errorf("%w: store.fail_mode %q: want closed, open or local", ErrInvalidConfig, c.Store.FailMode)
}

// failsafeOptions returns the options of the failsafe.Store in front of
// a shared store whose calls take timeout by default: the store section's
// failure mode, timeout, threshold and cooldown.
func (c *Config) failsafeOptions(timeout time.Duration) failsafe.Options {
	mode, _ := c.failMode()
	o := failsafe.Options{Mode: mode, Timeout: cmp.Or(c.Store.Timeout, timeout), Threshold: c.Store.Threshold, Cooldown: c.Store.Cooldown}
	if c.Store.FailFor != nil {
		o.FailFor = cmp.Or(*c.Store.FailFor, -1) // 0 in the file: no minimum
	}
	return o
}

// path resolves a file name of the configuration.
func (c *Config) path(name string) string {
	if name == "" || filepath.IsAbs(name) || c.dir == "" {
		return name
	}
	return filepath.Join(c.dir, name)
}

// files returns the files the configuration names, for the reload watcher.
func (c *Config) files() []string {
	var out []string
	for _, f := range []string{c.Auth.TokenFile, c.TLS.CertFile, c.TLS.KeyFile, c.TLS.ClientCAFile} {
		if f != "" {
			out = append(out, c.path(f))
		}
	}
	return out
}

// SnapshotFile returns the snapshot file the configuration names, resolved
// against its directory, or "".
func (c *Config) SnapshotFile() string { return c.path(c.Snapshot.File) }

// TLSEnabled reports whether the configuration serves TLS.
func (c *Config) TLSEnabled() bool { return c.TLS.CertFile != "" }

// limits is LimitsConfig with the defaults filled in.
type limits struct {
	maxBody   int64
	maxChecks int
	maxKey    int
	inline    bool
	maxInline int
	maxWait   time.Duration
}

func (c *Config) limits() limits {
	return limits{
		maxBody:   cmp.Or(c.Limits.MaxBodyBytes, DefaultMaxBodyBytes),
		maxChecks: cmp.Or(c.Limits.MaxChecks, DefaultMaxChecks),
		maxKey:    cmp.Or(c.Limits.MaxKeyBytes, DefaultMaxKeyBytes),
		inline:    c.Limits.InlinePolicies == nil || *c.Limits.InlinePolicies,
		maxInline: cmp.Or(c.Limits.MaxInlinePolicies, DefaultMaxInlinePolicies),
		maxWait:   cmp.Or(c.Limits.MaxWait, DefaultMaxWait),
	}
}

// tokenHash is the SHA-256 of an accepted token: tokens are compared by
// their hashes, in constant time, so that neither their contents nor
// their lengths leak through timing.
type tokenHash [sha256.Size]byte

// readTokens reads the accepted tokens: those of the token file, else the
// fallback (from the environment), else none.
func (c *Config) readTokens(fallback string) ([]tokenHash, error) {
	if c.Auth.TokenFile == "" {
		if fallback == "" {
			return nil, nil
		}
		return []tokenHash{sha256.Sum256([]byte(fallback))}, nil
	}
	if err := checkWritable("auth.token_file", c.path(c.Auth.TokenFile)); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(c.path(c.Auth.TokenFile))
	if err != nil {
		return nil, fmt.Errorf("%w: auth.token_file: %w", ErrInvalidConfig, err)
	}
	var out []tokenHash
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("%w: auth.token_file: a token holds a space", ErrInvalidConfig)
		}
		out = append(out, sha256.Sum256([]byte(line)))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: auth.token_file %s holds no token", ErrInvalidConfig, c.Auth.TokenFile)
	}
	return out, nil
}

// serverTLS is the TLS material of a configuration.
type serverTLS struct {
	cert      *tls.Certificate
	clientCAs *x509.CertPool
}

// readTLS reads the configuration's certificates, or returns nil when TLS
// is off.
func (c *Config) readTLS() (*serverTLS, error) {
	if !c.TLSEnabled() {
		return nil, nil
	}
	if err := checkWritable("tls.key_file", c.path(c.TLS.KeyFile)); err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(c.path(c.TLS.CertFile), c.path(c.TLS.KeyFile))
	if err != nil {
		return nil, fmt.Errorf("%w: tls: %w", ErrInvalidConfig, err)
	}
	st := &serverTLS{cert: &cert}
	if c.TLS.ClientCAFile != "" {
		pem, err := os.ReadFile(c.path(c.TLS.ClientCAFile))
		if err != nil {
			return nil, fmt.Errorf("%w: tls.client_ca_file: %w", ErrInvalidConfig, err)
		}
		st.clientCAs = x509.NewCertPool()
		if !st.clientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: tls.client_ca_file %s holds no PEM certificate", ErrInvalidConfig, c.TLS.ClientCAFile)
		}
	}
	return st, nil
}
