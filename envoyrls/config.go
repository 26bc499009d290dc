package envoyrls

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/suggest"
)

// Config is a set of envoyproxy/ratelimit configuration files, one domain
// each, parsed and checked. It is immutable and safe for concurrent use;
// one Config may serve several Services (each keeps its own state).
// The zero Config, like a nil *Config, has no domain.
type Config struct {
	domains  map[string]*domain
	rules    []*rule  // every rule of every domain; rule.id indexes it
	warnings []string // see Warnings
}

// A domain is one file's descriptor tree.
type domain struct {
	name, file string
	root       level
}

// A level is the descriptors at one depth under one parent, indexed the
// three ways a request entry can match them (see lookup).
type level struct {
	exact     map[entryKey]*node // descriptors with a value (wildcards too, literally)
	keyOnly   map[string]*node   // descriptors without a value
	wildcards []*node            // descriptors with a '*' in key or value, in file order
}

type entryKey struct{ key, value string }

// A node is one descriptor of the configuration.
type node struct {
	key, value string
	line       int
	pat        *pattern // a wildcard's, nil for the others
	share      bool     // share_threshold: every value the wildcard matches shares one limit
	rule       *rule    // nil without rate_limit
	children   level
}

// A rule is a descriptor's rate_limit.
type rule struct {
	id        int
	domain    string
	path      string // domain.key_value.key..., as upstream names a rule in its stats
	file      string
	line      int
	name      string
	replaces  []string
	unlimited bool
	shadow    bool
	quota     bool             // quota_mode: see verdict
	metadata  *structpb.Struct // the descriptor's metadata, nil without
	perUnit   uint32           // requests_per_unit; 0 blocks everything
	unit      rlsv3.RateLimitResponse_RateLimit_Unit
	period    time.Duration
	// multiplier is a limit override's unit_multiplier (windows of
	// multiplier units), when more than 1.
	multiplier uint32
	policy     algo.Policy // zero when unlimited or perUnit is 0
	// upstream is true for the fixed-window rules, which answer exactly as
	// envoyproxy/ratelimit's counters do (see the package documentation).
	upstream bool
}

// ErrInvalidConfig is wrapped by every error of ParseConfig and LoadConfig
// about a file's content; errors.As finds the *ConfigError with the file
// and line.
var ErrInvalidConfig = errors.New("invalid envoyrls configuration")

// A ConfigError is a problem with one configuration file.
type ConfigError struct {
	File    string // the file's name, as given to ParseConfig or found by LoadConfig
	Line    int    // 1-based; 0 when the problem concerns the whole file
	Problem string
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("envoyrls: %s:%d: %s", e.File, e.Line, e.Problem)
	}
	return fmt.Sprintf("envoyrls: %s: %s", e.File, e.Problem)
}

// Unwrap returns ErrInvalidConfig.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// units are the rate_limit units upstream accepts, with its window for
// each: fixed windows aligned to the Unix epoch, of 30 days for a month
// and 365 for a year (upstream's default; it has an option for calendar
// months, which floodgate does not have).
var units = map[string]struct {
	unit   rlsv3.RateLimitResponse_RateLimit_Unit
	period time.Duration
}{
	"SECOND": {rlsv3.RateLimitResponse_RateLimit_SECOND, time.Second},
	"MINUTE": {rlsv3.RateLimitResponse_RateLimit_MINUTE, time.Minute},
	"HOUR":   {rlsv3.RateLimitResponse_RateLimit_HOUR, time.Hour},
	"DAY":    {rlsv3.RateLimitResponse_RateLimit_DAY, 24 * time.Hour},
	"WEEK":   {rlsv3.RateLimitResponse_RateLimit_WEEK, 7 * 24 * time.Hour},
	"MONTH":  {rlsv3.RateLimitResponse_RateLimit_MONTH, 30 * 24 * time.Hour},
	"YEAR":   {rlsv3.RateLimitResponse_RateLimit_YEAR, 365 * 24 * time.Hour},
}

// The keys each mapping of a file may hold. detailed_metric and
// value_to_metric only shape upstream's statistics: they are accepted and
// ignored. algorithm, burst and capacity are floodgate's.
var (
	rootKeys       = []string{"domain", "descriptors"}
	descriptorKeys = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode", "metadata", "detailed_metric", "value_to_metric", "share_threshold"}
	rateLimitKeys  = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "burst", "capacity"}
	replacesKeys   = []string{"name"}
)

// ParseConfig parses envoyproxy/ratelimit configuration files: each value
// of files is the YAML of one file, named by its key, and holds one
// domain. See the package documentation for the format.
//
// An error names the file, the line and the problem: YAML that does not
// parse, an unknown key (with the likely intended one), a missing or
// duplicated domain, an empty descriptor key, a duplicated descriptor, a
// bad unit, requests_per_unit, algorithm or burst, an empty or
// self-naming replaces. It wraps ErrInvalidConfig and, for each file at
// fault, a *ConfigError; every file is checked, and the errors of several
// files are joined, in the order of their names.
func ParseConfig(files map[string][]byte) (*Config, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	c := &Config{domains: make(map[string]*domain)}
	var errs []error
	for _, name := range names {
		d, err := c.parseFile(name, files[name])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev := c.domains[d.name]; prev != nil {
			errs = append(errs, &ConfigError{File: name, Problem: fmt.Sprintf("duplicate domain %q, also in %s", d.name, prev.file)})
			continue
		}
		c.domains[d.name] = d
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// LoadConfig reads every *.yaml and *.yml file of dir and of its
// subdirectories, as upstream does, and parses them with ParseConfig. dir
// is the directory that holds the files,
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config in envoyproxy/ratelimit's
// layout; when dir holds no file itself but has a subdirectory named
// config, LoadConfig reads that instead, so that
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY works too. Symbolic links to files
// are followed (a Kubernetes ConfigMap mounts its files as links), links
// to directories are not, and files and directories whose names begin
// with a dot are skipped (a ConfigMap's ..data). A directory without
// files gives a Config with no domain.
//
// Upstream reads every file of the tree, dot files included unless
// RUNTIME_IGNOREDOTFILES is set: each file that it would read and
// LoadConfig skips is named in the Config's Warnings, which a Service
// logs; files inside dot-directories are skipped without a warning.
func LoadConfig(dir string) (*Config, error) {
	root, err := configRoot(dir)
	if err != nil {
		return nil, err
	}
	files, warnings, err := readYAMLTree(root)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(files)
	if err != nil {
		return nil, err
	}
	c.warnings = warnings
	return c, nil
}

// configRoot returns dir, or its subdirectory config when dir holds no
// file but that directory.
func configRoot(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("envoyrls: reading the configuration: %w", err)
	}
	sub := false
	for _, e := range entries {
		switch {
		case e.Name() == "config" && e.IsDir():
			sub = true
		case !e.IsDir() && !strings.HasPrefix(e.Name(), "."):
			return dir, nil
		}
	}
	if sub {
		return filepath.Join(dir, "config"), nil
	}
	return dir, nil
}

// readYAMLTree reads the configuration files under root (see LoadConfig),
// by path, and returns a warning for each file skipped that upstream
// would read.
func readYAMLTree(root string) (files map[string][]byte, warnings []string, err error) {
	files = make(map[string][]byte)
	err = filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case path == root:
			return nil
		case e.IsDir() && strings.HasPrefix(e.Name(), "."):
			return filepath.SkipDir
		case e.IsDir():
			return nil
		}
		fi, err := os.Stat(path) // follows links
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		name, ext := e.Name(), filepath.Ext(e.Name())
		switch {
		case ext != ".yaml" && ext != ".yml":
			if !strings.HasPrefix(name, ".") {
				warnings = append(warnings, fmt.Sprintf("%s skipped: not a .yaml or .yml file (upstream would read it)", path))
			}
		case strings.HasPrefix(name, "."):
			warnings = append(warnings, fmt.Sprintf("%s skipped: its name begins with a dot (upstream reads it unless RUNTIME_IGNOREDOTFILES is set)", path))
		default:
			files[path], err = os.ReadFile(path)
		}
		return err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("envoyrls: reading the configuration: %w", err)
	}
	return files, warnings, nil
}

// Warnings returns what LoadConfig found that upstream would have read
// and floodgate did not: a sentence for each file, naming it. A Service
// logs them, at level Warn, when it is given the Config.
func (c *Config) Warnings() []string {
	if c == nil {
		return nil
	}
	return c.warnings
}

// Domains returns the names of the configuration's domains, sorted.
func (c *Config) Domains() []string {
	if c == nil {
		return nil
	}
	names := make([]string, 0, len(c.domains))
	for name := range c.domains {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// maxNodes bounds the YAML nodes a file may expand to, aliases included,
// so that a file of a few bytes cannot make the parser walk billions.
const maxNodes = 1 << 20

// parser is the state of parsing one file.
type parser struct {
	c      *Config
	file   string
	domain string
	nodes  int
}

// A failure is a *ConfigError in flight: the parser panics with it and
// parseFile recovers it, which keeps the walk below free of error plumbing.
type failure struct{ err *ConfigError }

func (p *parser) fail(n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	panic(failure{&ConfigError{File: p.file, Line: line, Problem: fmt.Sprintf(format, args...)}})
}

func (c *Config) parseFile(file string, data []byte) (d *domain, err error) {
	p := &parser{c: c, file: file}
	firstRule := len(c.rules)
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(failure)
			if !ok {
				panic(r)
			}
			c.rules = c.rules[:firstRule]
			d, err = nil, f.err
		}
	}()
	doc := p.decode(data)
	root := p.deref(doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = p.deref(root.Content[0])
	}
	if p.isNull(root) {
		p.fail(root, "config file cannot have empty domain")
	}
	d = &domain{file: file}
	var descs *yaml.Node
	for _, kv := range p.mapping(root, "the file", rootKeys) {
		switch kv.key {
		case "domain":
			d.name = p.str(kv.value, "domain")
		case "descriptors":
			descs = kv.value
		}
	}
	if d.name == "" {
		p.fail(root, "config file cannot have empty domain")
	}
	p.domain = d.name
	p.level(&d.root, descs, d.name)
	return d, nil
}

// decode parses the file's one YAML document.
func (p *parser) decode(data []byte) (doc *yaml.Node) {
	defer func() {
		// The YAML library should not panic; if it does, the file is
		// refused rather than the process brought down.
		if r := recover(); r != nil {
			if _, ok := r.(failure); ok {
				panic(r)
			}
			p.fail(nil, "invalid YAML (%v)", r)
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	doc = new(yaml.Node)
	switch err := dec.Decode(doc); {
	case errors.Is(err, io.EOF):
		p.fail(nil, "config file cannot have empty domain")
	case err != nil:
		p.fail(nil, "invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		p.fail(&extra, "more than one YAML document")
	}
	return doc
}

// level parses a list of descriptors into l.
func (p *parser) level(l *level, list *yaml.Node, parentPath string) {
	if list == nil {
		return
	}
	list = p.deref(list)
	if p.isNull(list) {
		return
	}
	if list.Kind != yaml.SequenceNode {
		p.fail(list, "descriptors must be a list, not %s", kindName(list))
	}
	for _, item := range list.Content {
		l.add(p.descriptor(l, p.deref(item), parentPath))
	}
}

// descriptor parses item, a descriptor of the level l under parentPath,
// and its own descriptors.
func (p *parser) descriptor(l *level, item *yaml.Node, parentPath string) *node {
	n, f := p.descriptorFields(item)
	if n.key == "" {
		p.fail(item, "descriptor has empty key")
	}
	path := parentPath + "." + composite(n.key, n.value)
	n.pat = newPattern(n.key, n.value)
	if n.share && n.pat == nil {
		p.fail(item, "share_threshold can only be used with wildcard values (containing '*'), but %s has value %q", n.key, n.value)
	}
	if prev := l.find(n.key, n.value); prev != nil {
		p.fail(item, "duplicate descriptor composite key '%s' (first at line %d)", path, prev.line)
	}
	if f.rl != nil && !p.isNull(p.deref(f.rl)) {
		n.rule = p.rateLimit(p.deref(f.rl), path, f)
	}
	p.level(&n.children, f.children, path)
	return n
}

// descriptorFields are the fields of a descriptor that go to its rule,
// and its rate_limit and descriptors, which the caller parses once it
// has checked the descriptor.
type descriptorFields struct {
	rl, children  *yaml.Node
	shadow, quota bool
	metadata      *structpb.Struct
}

// descriptorFields reads the mapping of a descriptor: its own fields into
// n, the others into f.
func (p *parser) descriptorFields(item *yaml.Node) (n *node, f descriptorFields) {
	n = &node{line: item.Line}
	for _, kv := range p.mapping(item, "a descriptor", descriptorKeys) {
		switch kv.key {
		case "key":
			n.key = p.str(kv.value, "key")
		case "value":
			n.value = p.str(kv.value, "value")
		case "rate_limit":
			f.rl = kv.value
		case "descriptors":
			f.children = kv.value
		case "shadow_mode":
			f.shadow = p.boolean(kv.value, "shadow_mode")
		case "quota_mode":
			f.quota = p.boolean(kv.value, "quota_mode")
		case "metadata":
			f.metadata = p.metadata(kv.value)
		case "share_threshold":
			n.share = p.boolean(kv.value, "share_threshold")
		case "detailed_metric", "value_to_metric":
			p.boolean(kv.value, kv.key) // checked, then ignored: statistics only
		}
	}
	return n, f
}

func (l *level) find(key, value string) *node {
	if value == "" {
		return l.keyOnly[key]
	}
	return l.exact[entryKey{key, value}]
}

func (l *level) add(n *node) {
	if n.pat != nil {
		l.wildcards = append(l.wildcards, n)
	}
	if n.value == "" {
		if l.keyOnly == nil {
			l.keyOnly = make(map[string]*node)
		}
		l.keyOnly[n.key] = n
		return
	}
	if l.exact == nil {
		l.exact = make(map[entryKey]*node)
	}
	l.exact[entryKey{n.key, n.value}] = n
}

// rateLimit parses a rate_limit mapping.
func (p *parser) rateLimit(m *yaml.Node, path string, df descriptorFields) *rule {
	r := &rule{id: len(p.c.rules), domain: p.domain, path: path, file: p.file, line: m.Line,
		shadow: df.shadow, quota: df.quota, metadata: df.metadata}
	f := p.rateLimitFields(m, r)
	for _, name := range r.replaces {
		if name == "" {
			p.fail(m, "should not have an empty replaces entry")
		}
		if name == r.name {
			p.fail(m, "replaces should not contain name of same descriptor")
		}
	}
	if r.unlimited {
		p.unlimited(m, f)
	} else {
		p.limit(m, r, f)
	}
	p.c.rules = append(p.c.rules, r)
	return r
}

// rateLimitFields are the fields of a rate_limit that make its policy,
// as written, with their nodes (nil when absent) for the messages.
type rateLimitFields struct {
	unitNode, algNode, burstNode *yaml.Node
	unitName, alg                string
	burst                        int64
}

// rateLimitFields reads the mapping m of a rate_limit: into r the fields
// that need no other, and the others into f.
func (p *parser) rateLimitFields(m *yaml.Node, r *rule) (f rateLimitFields) {
	for _, kv := range p.mapping(m, "a rate_limit", rateLimitKeys) {
		switch kv.key {
		case "unit":
			f.unitNode, f.unitName = kv.value, p.str(kv.value, "unit")
		case "requests_per_unit":
			r.perUnit = p.requestsPerUnit(kv.value)
		case "unlimited":
			r.unlimited = p.boolean(kv.value, "unlimited")
		case "name":
			r.name = p.str(kv.value, "name")
		case "replaces":
			r.replaces = p.replaces(kv.value)
		case "algorithm":
			f.algNode, f.alg = kv.value, p.str(kv.value, "algorithm")
		case "burst", "capacity":
			if f.burstNode != nil {
				p.fail(kv.value, "burst and capacity are the same setting: give one")
			}
			f.burstNode, f.burst = kv.value, p.integer(kv.value, kv.key)
		}
	}
	return f
}

// requestsPerUnit reads requests_per_unit: an unsigned 32-bit integer, as
// upstream's.
func (p *parser) requestsPerUnit(v *yaml.Node) uint32 {
	n := p.integer(v, "requests_per_unit")
	if n < 0 || n > math.MaxUint32 {
		p.fail(v, "requests_per_unit %d is not an unsigned 32-bit integer", n)
	}
	return uint32(n)
}

// unlimited checks the rate_limit m of an unlimited rule, which takes no
// unit, algorithm or burst.
func (p *parser) unlimited(m *yaml.Node, f rateLimitFields) {
	if _, ok := units[strings.ToUpper(f.unitName)]; ok {
		p.fail(f.unitNode, "should not specify rate limit unit when unlimited")
	}
	if f.algNode != nil || f.burstNode != nil {
		p.fail(m, "an unlimited rate_limit takes no algorithm, burst or capacity")
	}
}

// limit sets the unit, window and policy of r, the rule of the rate_limit
// m, from f.
func (p *parser) limit(m *yaml.Node, r *rule, f rateLimitFields) {
	u, ok := units[strings.ToUpper(f.unitName)]
	if !ok {
		p.fail(cmp.Or(f.unitNode, m), "invalid rate limit unit '%s' (want second, minute, hour, day, week, month or year)", f.unitName)
	}
	r.unit, r.period = u.unit, u.period
	a := algo.FixedWindow
	if f.algNode != nil {
		if a, ok = algorithms[f.alg]; !ok {
			p.fail(f.algNode, "unknown algorithm %q (want token-bucket, leaky-bucket, sliding-log, sliding-window or fixed-window)", f.alg)
		}
	}
	r.upstream = a == algo.FixedWindow
	if r.perUnit == 0 {
		if f.burstNode != nil {
			p.fail(f.burstNode, "a rate_limit with requests_per_unit 0 blocks everything and takes no burst or capacity")
		}
		return
	}
	pol, err := algo.New(a, int64(r.perUnit), r.period, f.burst)
	if err != nil {
		p.fail(cmp.Or(f.burstNode, m), "%s", strings.TrimPrefix(err.Error(), algo.ErrInvalidPolicy.Error()+": "))
	}
	r.policy = pol
}

var algorithms = func() map[string]algo.Algorithm {
	m := make(map[string]algo.Algorithm)
	for _, a := range []algo.Algorithm{algo.TokenBucket, algo.LeakyBucket, algo.SlidingLog, algo.SlidingWindow, algo.FixedWindow} {
		m[a.String()] = a
	}
	return m
}()

func (p *parser) replaces(n *yaml.Node) []string {
	n = p.deref(n)
	if p.isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "replaces must be a list of {name: ...}, not %s", kindName(n))
	}
	var names []string
	for _, item := range n.Content {
		item = p.deref(item)
		name := ""
		for _, kv := range p.mapping(item, "a replaces entry", replacesKeys) {
			name = p.str(kv.value, "name")
		}
		names = append(names, name)
	}
	return names
}

// keyValue is one entry of a YAML mapping.
type keyValue struct {
	key   string
	value *yaml.Node
}

// mapping returns the entries of the mapping n (what, for messages, such
// as "a descriptor"), its merge keys ("<<") resolved as YAML 1.1 and
// upstream's YAML library resolve them, and fails on a key not in allowed
// (any key when allowed is nil) and on a duplicated key.
func (p *parser) mapping(n *yaml.Node, what string, allowed []string) []keyValue {
	n = p.deref(n)
	if n.Kind != yaml.MappingNode {
		p.fail(n, "%s must be a mapping, not %s", what, kindName(n))
	}
	var out, merged []keyValue
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := p.deref(n.Content[i]), n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.fail(k, "config error, key is not of type string in %s", what)
		}
		if k.Value == "<<" && k.Style == 0 {
			merged = append(merged, p.merge(v, what, allowed)...)
			continue
		}
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			msg := fmt.Sprintf("config error, unknown key '%s' in %s", k.Value, what)
			if s := suggest.Closest(k.Value, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean '%s'?)", s)
			}
			p.fail(k, "%s", msg)
		}
		if line, dup := seen[k.Value]; dup {
			p.fail(k, "key '%s' given twice in %s (first at line %d)", k.Value, what, line)
		}
		seen[k.Value] = k.Line
		out = append(out, keyValue{k.Value, v})
	}
	for _, kv := range merged { // explicit keys win over merged ones
		if _, ok := seen[kv.key]; !ok {
			seen[kv.key] = 0
			out = append(out, kv)
		}
	}
	return out
}

func (p *parser) merge(v *yaml.Node, what string, allowed []string) []keyValue {
	v = p.deref(v)
	switch v.Kind {
	case yaml.MappingNode:
		return p.mapping(v, what, allowed)
	case yaml.SequenceNode:
		var out []keyValue
		seen := make(map[string]bool)
		for _, m := range v.Content { // earlier mappings win
			for _, kv := range p.mapping(m, what, allowed) {
				if !seen[kv.key] {
					seen[kv.key] = true
					out = append(out, kv)
				}
			}
		}
		return out
	}
	p.fail(v, "a merge key (<<) takes a mapping or a list of mappings, not %s", kindName(v))
	return nil
}

// deref follows aliases, counting the nodes the parse visits.
func (p *parser) deref(n *yaml.Node) *yaml.Node {
	for hops := 0; n != nil && n.Kind == yaml.AliasNode; hops++ {
		if hops > 100 {
			p.fail(n, "alias chain too long")
		}
		n = n.Alias
	}
	if n == nil {
		p.fail(nil, "invalid YAML: dangling alias")
	}
	p.nodes++
	if p.nodes > maxNodes {
		p.fail(n, "the file expands to more than %d YAML nodes", maxNodes)
	}
	return n
}

func (p *parser) isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// str returns a scalar's text, as upstream's YAML library (yaml.v2) reads
// any scalar into a string field: "value: 80" is the string "80". A null
// is the empty string.
func (p *parser) str(n *yaml.Node, what string) string {
	n = p.deref(n)
	if n.Kind != yaml.ScalarNode {
		p.fail(n, "%s must be a string, not %s", what, kindName(n))
	}
	if p.isNull(n) {
		return ""
	}
	return n.Value
}

// boolean reads a boolean as yaml.v2 does (see yamlBool).
func (p *parser) boolean(n *yaml.Node, what string) bool {
	n = p.deref(n)
	if plain(n) {
		if p.isNull(n) {
			return false
		}
		if v, ok := yamlBool(n.Value); ok {
			return v
		}
	}
	p.fail(n, "%s must be true or false, not %s", what, describe(n))
	return false
}

// integer reads an integer as yaml.v2 does (see yamlInt).
func (p *parser) integer(n *yaml.Node, what string) int64 {
	n = p.deref(n)
	if plain(n) {
		if p.isNull(n) {
			return 0
		}
		if v, ok := yamlInt(n.Value); ok {
			return v
		}
	}
	p.fail(n, "%s must be an integer, not %s", what, describe(n))
	return 0
}

// plain reports whether n is a scalar written without quotes or block
// style: the only one YAML reads as a boolean or a number.
func plain(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0
}

// yamlBool reads the text of a plain scalar as a boolean, as yaml.v2 does,
// which takes yes/no, y/n and on/off too.
func yamlBool(s string) (v, ok bool) {
	switch s {
	case "true", "True", "TRUE", "y", "Y", "yes", "Yes", "YES", "on", "On", "ON":
		return true, true
	case "false", "False", "FALSE", "n", "N", "no", "No", "NO", "off", "Off", "OFF":
		return false, true
	}
	return false, false
}

// yamlInt reads the text of a plain scalar as an integer, as yaml.v2
// does: decimal, 0x hexadecimal, 0o or 0 octal, 0b binary, with '_'
// separators allowed.
func yamlInt(s string) (int64, bool) {
	s = strings.ReplaceAll(s, "_", "")
	if v, err := strconv.ParseInt(s, 0, 64); err == nil {
		return v, true
	}
	if strings.HasPrefix(s, "0o") || strings.HasPrefix(s, "0O") {
		if v, err := strconv.ParseInt(s[2:], 8, 64); err == nil {
			return v, true
		}
	}
	return 0, false
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return describe(n)
	}
	return "a YAML document"
}

func describe(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return kindName(n)
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return strconv.Quote(v)
}
