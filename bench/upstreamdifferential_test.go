package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/ratelimit/src/config"

	"github.com/floodgate/floodgate/clock"
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

// derivedSteps are requests on domain derived from its descriptors:
// each alone, checked without counting (its own hits_addend 0), then
// counted, brought to its limit and past it; all at once in one request;
// each with an entry more, with its last value changed or empty; each
// under a limit override; a descriptor without entries and an unknown
// domain; then each again in later windows (a second, an hour, a day on).
// They ask for no answer in particular: every peer must answer as
// upstream does.
func derivedSteps(domain string, paths []configPath) []step {
	var steps []step
	each := func(s step, hits func(configPath) uint32, desc func(configPath) []string) {
		for _, p := range paths {
			s.descs, s.hits = [][]string{desc(p)}, hits(p)
			if s.hits > 0 {
				steps = append(steps, s)
			}
			s.after = 0
		}
	}
	one := func(configPath) uint32 { return 1 }
	same := func(p configPath) []string { return p.entries }
	each(step{domain: domain, descHits: map[int]uint64{0: 0}}, one, same)
	each(step{domain: domain}, one, same)
	each(step{domain: domain}, func(p configPath) uint32 {
		if l := p.limit; l != nil && !l.Unlimited && l.RequestsPerUnit >= 2 && l.RequestsPerUnit <= 1_000_000 {
			return l.RequestsPerUnit - 1
		}
		return 0
	}, same)
	each(step{domain: domain}, one, same)
	if len(paths) > 1 && len(paths) <= 32 {
		all := step{domain: domain}
		for _, p := range paths {
			all.descs = append(all.descs, p.entries)
		}
		steps = append(steps, all)
	}
	each(step{domain: domain}, one, func(p configPath) []string { return append(append([]string(nil), p.entries...), "extra", "e") })
	each(step{domain: domain}, one, func(p configPath) []string { return withLast(p.entries, "zz-other") })
	each(step{domain: domain}, one, func(p configPath) []string { return withLast(p.entries, "") })
	for _, o := range []string{"3/MINUTE", "5/HOUR"} {
		each(step{domain: domain, override: map[int]string{0: o}}, one, same)
	}
	steps = append(steps, step{domain: domain, descs: [][]string{{}}}, step{domain: domain + "-unknown", descs: [][]string{{"k", "v"}}})
	for _, after := range []time.Duration{time.Second, time.Hour, 24 * time.Hour} {
		each(step{domain: domain, after: after}, one, same)
	}
	return steps
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
	why: "upstream counts a limit override on the descriptor's own counter (its cache key names the " +
		"descriptor and the window, not the limit), so an override sees the hits of the configuration's rule " +
		"of the same unit; floodgate keeps an override's counts apart (branch envoymatch changes that)",
	applies: func(_ string, s step) bool { return len(s.override) > 0 },
})

// TestUpstreamDifferential: on each configuration file of upstream's
// module that upstream loads, floodgate's envoyrls (memory store and a
// real redis-server) answers as upstream's service does (on the same
// redis-server) the requests derived from the file's descriptors
// (derivedSteps), all reading one fake clock.
func TestUpstreamDifferential(t *testing.T) {
	u := findUpstream(t)
	srv := redistest.NewServer(t)
	requests := 0
	for _, name := range u.yamlFiles(t) {
		files := u.read(t, name)
		if _, err := upstreamLoad(files); err != nil {
			continue
		}
		root := config.ConfigFileContentToYaml(name, string(files[name]))
		steps := derivedSteps(root.Domain, configPaths(nil, root.Descriptors))
		requests += len(steps)
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(suiteT0)
			runSteps(t, name, newPeers(t, srv, clk, files), clk, steps, differentialDifferences)
		})
	}
	differentialDifferences.check(t)
	t.Logf("%d requests derived from upstream's files", requests)
}
