package bench

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/ratelimit/src/config"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/envoyrls"
	"github.com/floodgate/floodgate/internal/redistest"
)

// A configPath is one descriptor of a configuration file, with a request
// descriptor that reaches it: the entries from the root down, wildcards
// given a value they match.
type configPath struct {
	entries []string // key, value, key, value...
	limit   *config.YamlRateLimit
}

// configPaths returns every descriptor of the tree ds under prefix, depth
// first, in file order.
func configPaths(prefix []string, ds []config.YamlDescriptor) []configPath {
	var paths []configPath
	for _, d := range ds {
		value := d.Value
		switch {
		case value == "":
			value = "v1"
		case strings.HasSuffix(value, "*"):
			value = strings.TrimSuffix(value, "*") + "x1"
		}
		entries := append(append([]string(nil), prefix...), d.Key, value)
		paths = append(paths, configPath{entries, d.RateLimit})
		paths = append(paths, configPaths(entries, d.Descriptors)...)
	}
	return paths
}

// zero reports whether the path's rule is a limit of 0.
func (p configPath) zero() bool {
	return p.limit != nil && !p.limit.Unlimited && p.limit.RequestsPerUnit == 0
}

// tagOverrideOther tags the derived steps of a limit override of another
// unit than the path's rule's (a documented difference).
const tagOverrideOther = "a limit override of another unit than its rule's"

// derivedSteps are requests on domain derived from its descriptors:
// each alone, checked without counting (its own hits_addend 0), then
// counted, brought to its limit and past it; all at once in one request;
// each with an entry more, with its last value changed or empty; each
// under a limit override of its rule's unit and of another; the limits of
// 0 checked again; a descriptor without entries and an unknown domain;
// then each again in later windows (a second, an hour, a day on). They
// ask for no answer in particular: every peer must answer as upstream
// does.
func derivedSteps(domain string, paths []configPath) []step {
	var steps []step
	// each adds the step build makes of each path, if any, the first
	// added after the clock moves on by after.
	each := func(after time.Duration, build func(configPath) (step, bool)) {
		for _, p := range paths {
			if s, ok := build(p); ok {
				s.domain, s.after, after = domain, after, 0
				steps = append(steps, s)
			}
		}
	}
	alone := func(desc []string) step { return step{descs: [][]string{desc}} }
	same := func(p configPath) (step, bool) { return alone(p.entries), true }
	each(0, func(p configPath) (step, bool) {
		s := alone(p.entries)
		s.descHits = map[int]uint64{0: 0}
		return s, true
	})
	each(0, same)
	each(0, func(p configPath) (step, bool) {
		s, l := alone(p.entries), p.limit
		if l == nil || l.Unlimited || l.RequestsPerUnit < 2 || l.RequestsPerUnit > 1_000_000 {
			return s, false
		}
		s.hits = l.RequestsPerUnit - 1
		return s, true
	})
	each(0, same)
	if len(paths) > 1 && len(paths) <= 32 {
		all := step{domain: domain}
		for _, p := range paths {
			all.descs = append(all.descs, p.entries)
		}
		steps = append(steps, all)
	}
	each(0, func(p configPath) (step, bool) {
		return alone(append(append([]string(nil), p.entries...), "extra", "e")), true
	})
	each(0, func(p configPath) (step, bool) { return alone(withLast(p.entries, "zz-other")), true })
	each(0, func(p configPath) (step, bool) { return alone(withLast(p.entries, "")), true })
	each(0, override(false))
	each(0, override(true))
	each(0, func(p configPath) (step, bool) {
		s := alone(p.entries)
		s.descHits = map[int]uint64{0: 0}
		return s, p.zero()
	})
	steps = append(steps, step{domain: domain, descs: [][]string{{}}}, step{domain: domain + "-unknown", descs: [][]string{{"k", "v"}}})
	for _, after := range []time.Duration{time.Second, time.Hour, 24 * time.Hour} {
		each(after, same)
	}
	return steps
}

// override returns the builder of a step that asks for a path under a
// limit override of 3 in its rule's unit, or with other in another unit
// (none for a path without a rule, or of a week).
func override(other bool) func(configPath) (step, bool) {
	return func(p configPath) (step, bool) {
		s := step{descs: [][]string{p.entries}}
		unit := "MINUTE"
		if l := p.limit; l != nil && !l.Unlimited {
			unit = strings.ToUpper(l.Unit)
			if other {
				unit, s.tag = "HOUR", tagOverrideOther
				if strings.EqualFold(l.Unit, "hour") {
					unit = "DAY"
				}
			}
		} else if other {
			return s, false
		}
		s.override = map[int]string{0: "3/" + unit}
		// Envoy's override has no week: upstream's process dies of an
		// UNKNOWN unit (TestUpstreamDocumentedDifferences).
		_, known := typev3.RateLimitUnit_value[unit]
		return s, known
	}
}

// randomSteps are n requests on domain drawn from its descriptors with a
// generator seeded by seed: each of one to three descriptors, a path of
// the configuration, sometimes cut short, lengthened or given another
// value, costing one to four hits (a descriptor sometimes its own), the
// clock sometimes moved on by up to an hour first. Checks that count
// nothing are left out: past a limit they answer otherwise on purpose
// (TestUpstreamDocumentedDifferences), as are limit overrides
// (derivedSteps has them).
func randomSteps(domain string, paths []configPath, seed uint64, n int) []step {
	if len(paths) == 0 {
		return nil
	}
	r := rand.New(rand.NewPCG(seed, 18))
	advances := []time.Duration{0, 0, 0, 0, 0, time.Second, 10 * time.Second, time.Minute, time.Hour}
	steps := make([]step, n)
	for i := range steps {
		s := step{domain: domain, after: advances[r.IntN(len(advances))], hits: uint32(r.IntN(4) + 1)}
		for j := range r.IntN(3) + 1 {
			s.descs = append(s.descs, mutate(r, paths[r.IntN(len(paths))].entries))
			if r.IntN(4) == 0 {
				if s.descHits == nil {
					s.descHits = map[int]uint64{}
				}
				s.descHits[j] = uint64(r.IntN(3) + 1)
			}
		}
		steps[i] = s
	}
	return steps
}

// mutate returns entries, or most times a copy cut short, lengthened or
// with its last value changed.
func mutate(r *rand.Rand, entries []string) []string {
	switch r.IntN(8) {
	case 0:
		if len(entries) > 2 {
			return entries[:len(entries)-2]
		}
	case 1:
		return append(append([]string(nil), entries...), "extra", "e")
	case 2:
		return withLast(entries, fmt.Sprintf("v%d", r.IntN(3)))
	}
	return entries
}

// withLast returns entries with the last value replaced by value.
func withLast(entries []string, value string) []string {
	e := append([]string(nil), entries...)
	e[len(e)-1] = value
	return e
}

// differentialDifferences are the known differences between floodgate's
// and upstream's answers to the derived requests.
var differentialDifferences = newKnown(difference{
	why: "upstream's counter of a limit override of another unit than the configured rule's is the rule's " +
		"whenever both windows start at the same second (its cache key names the window's start, not its " +
		"length; at the tests' start, midnight, all do); floodgate's never is",
	doc:     "A limit override of another unit than its descriptor's rule has a counter of its own",
	applies: func(_ string, s step) bool { return s.tag == tagOverrideOther },
})

// randomRequests is how many requests randomSteps draws for each file.
const randomRequests = 25

// TestUpstreamDifferential: on each configuration file of upstream's
// module that upstream loads, floodgate's envoyrls (memory store and a
// real redis-server) answers as upstream's service does (on the same
// redis-server) the requests derived from the file's descriptors
// (derivedSteps, randomSteps), all reading one fake clock.
func TestUpstreamDifferential(t *testing.T) {
	u := findUpstream(t)
	srv := redistest.NewServer(t)
	requests := 0
	for _, name := range u.yamlFiles(t) {
		files := u.read(t, name)
		if _, err := upstreamLoad(files); err != nil {
			continue
		}
		t.Run(name, func(t *testing.T) {
			requests += runDifferential(t, srv, name, files)
		})
	}
	differentialDifferences.check(t)
	t.Logf("%d requests derived from upstream's files", requests)
}

// runDifferential derives requests from the one file of files, named
// name, and checks that the peers on it, started with opts, answer them
// alike; it returns how many there were.
func runDifferential(t *testing.T, srv *redistest.Server, name string, files map[string][]byte, opts ...envoyrls.Option) int {
	t.Helper()
	root := config.ConfigFileContentToYaml(name, string(files[name]))
	paths := configPaths(nil, root.Descriptors)
	h := fnv.New64a()
	h.Write([]byte(name))
	steps := append(derivedSteps(root.Domain, paths), randomSteps(root.Domain, paths, h.Sum64(), randomRequests)...)
	clk := clock.NewFake(suiteT0)
	runSteps(t, name, newPeers(t, srv, clk, files, opts...), clk, steps, differentialDifferences)
	return len(steps)
}

// ownFixtures are configurations of this test's own, for what upstream's
// module reads and answers but its files do not use: the units of a week
// and more, a number and a yes where a string belongs, YAML anchors and
// merge keys, shadow mode and replaces side by side, an unlimited rule
// that replaces, the statistics-only keys, a unit in capitals.
var ownFixtures = map[string]string{"own.yaml": `domain: own
descriptors:
  - key: port
    value: 80
    rate_limit: {unit: week, requests_per_unit: 3}
  - key: flag
    value: yes
    rate_limit: {unit: month, requests_per_unit: 2}
  - key: calendar
    rate_limit: {unit: year, requests_per_unit: 2}
  - &gold
    key: tier
    value: gold
    shadow_mode: on
    rate_limit: {unit: day, requests_per_unit: 1, name: gold}
  - <<: *gold
    value: silver
    shadow_mode: off
    rate_limit: {unit: day, requests_per_unit: 2, name: silver, replaces: [{name: gold}]}
  - key: free
    rate_limit: {unlimited: true, name: free, replaces: [{name: silver}]}
  - key: stats
    detailed_metric: true
    value_to_metric: true
    descriptors:
      - key: leaf
        rate_limit: {unit: SECOND, requests_per_unit: 2}
`}

// TestUpstreamOwnFixtures: upstream's loader and floodgate's load
// ownFixtures, and floodgate answers the requests derived from them as
// upstream's service does.
func TestUpstreamOwnFixtures(t *testing.T) {
	srv := redistest.NewServer(t)
	for name, text := range ownFixtures {
		t.Run(name, func(t *testing.T) {
			files := map[string][]byte{name: []byte(text)}
			if _, err := upstreamLoad(files); err != nil {
				t.Fatalf("upstream %s", verdict(err))
			}
			if _, err := envoyrls.ParseConfig(files); err != nil {
				t.Fatalf("floodgate %s", verdict(err))
			}
			t.Logf("%d requests", runDifferential(t, srv, name, files))
		})
	}
	differentialDifferences.check(t)
}

// TestUpstreamGlobalShadowMode: with the whole service in shadow mode
// (upstream's SHADOW_MODE, envoyrls.WithShadowMode), floodgate answers the
// requests derived from upstream's integration configuration as upstream
// does.
func TestUpstreamGlobalShadowMode(t *testing.T) {
	u := findUpstream(t)
	srv := redistest.NewServer(t)
	t.Setenv("SHADOW_MODE", "true") // upstream reads it at each configuration load
	for _, name := range u.integrationFiles(t) {
		t.Run(name, func(t *testing.T) {
			t.Logf("%d requests", runDifferential(t, srv, name, u.read(t, name), envoyrls.WithShadowMode(true)))
		})
	}
	differentialDifferences.check(t)
}

// TestUpstreamResponseHeaders: with response headers on (upstream's
// LIMIT_RESPONSE_HEADERS_ENABLED, envoyrls.WithResponseHeaders with
// UpstreamHeaders), floodgate answers the requests derived from upstream's
// integration configuration and from ownFixtures as upstream does, its
// RateLimit-Limit, -Remaining and -Reset included.
func TestUpstreamResponseHeaders(t *testing.T) {
	u := findUpstream(t)
	srv := redistest.NewServer(t)
	t.Setenv("LIMIT_RESPONSE_HEADERS_ENABLED", "true") // upstream reads it at each configuration load
	files := map[string]map[string][]byte{}
	for _, name := range u.integrationFiles(t) {
		files[name] = u.read(t, name)
	}
	for name, text := range ownFixtures {
		files[name] = map[string][]byte{name: []byte(text)}
	}
	for _, name := range slices.Sorted(mapsKeys(files)) {
		t.Run(name, func(t *testing.T) {
			t.Logf("%d requests", runDifferential(t, srv, name, files[name], envoyrls.WithResponseHeaders(envoyrls.UpstreamHeaders)))
		})
	}
	differentialDifferences.check(t)
}
