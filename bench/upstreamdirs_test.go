package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/envoyproxy/ratelimit/src/config"
	"github.com/envoyproxy/ratelimit/src/provider"
	"github.com/envoyproxy/ratelimit/src/settings"
	gostats "github.com/lyft/gostats"

	"github.com/floodgate/floodgate/envoyrls"
)

// upstreamLoadDir loads dir as upstream's runner does by default: its
// file provider, on goruntime's loader, with dir as
// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config (RUNTIME_WATCH_ROOT on, dot
// files read), and returns its first configuration or error. The loader
// watches the directory with inotify until the process ends (it cannot be
// stopped), so few directories should be loaded so.
func upstreamLoadDir(t testing.TB, dir string) (cfg config.RateLimitConfig, err error) {
	t.Helper()
	s := settings.NewSettings()
	s.RuntimePath = filepath.Dir(filepath.Dir(dir))
	s.RuntimeSubdirectory, s.RuntimeAppDirectory = filepath.Base(filepath.Dir(dir)), filepath.Base(dir)
	s.RuntimeWatchRoot, s.RuntimeIgnoreDotFiles = true, false
	p := func() (p provider.RateLimitConfigProvider) {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("upstream's file provider on %s: %v", dir, r)
			}
		}()
		return provider.NewFileProvider(s, upstreamStats(), gostats.NewStore(gostats.NewNullSink(), false))
	}()
	select {
	case ev := <-p.ConfigUpdateEvent():
		cfg, e := ev.GetConfig()
		if e != nil {
			return nil, fmt.Errorf("%v", e)
		}
		return cfg, nil
	case <-time.After(10 * time.Second):
		t.Fatalf("upstream's file provider sent no configuration for %s in 10 s", dir)
		return nil, nil
	}
}

// upstreamDomains are the domains with at least one rule of cfg, read from
// its Dump (one line per rule, its statistics key beginning with the
// domain and a dot).
func upstreamDomains(cfg config.RateLimitConfig) []string {
	var domains []string
	for line := range strings.Lines(cfg.Dump()) {
		if d, _, ok := strings.Cut(line, "."); ok && !slices.Contains(domains, d) {
			domains = append(domains, d)
		}
	}
	slices.Sort(domains)
	return domains
}

// A dirFixture is a configuration directory of the test's own, as
// relative paths and contents, every domain with a rule. doc, when not
// "", is the phrase of envoyrls's documentation that makes floodgate load
// it otherwise than upstream's runner on purpose.
type dirFixture struct {
	name  string
	files map[string]string
	doc   string
}

func domainFile(name string) string {
	return "domain: " + name + "\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n"
}

// dirFixtures hold what upstream's runner reads in a directory besides
// its *.yaml files.
var dirFixtures = []dirFixture{
	{"a subdirectory", map[string]string{"a.yaml": domainFile("a"), "teams/b.yaml": domainFile("b")}, ""},
	{"a dot file", map[string]string{"a.yaml": domainFile("a"), ".b.yaml": domainFile("b")}, dirsDoc},
	{"another extension", map[string]string{"a.yaml": domainFile("a"), "b.conf": domainFile("b")}, dirsDoc},
}

// dirsDoc is the phrase of envoyrls's documentation on the files
// LoadConfig skips.
const dirsDoc = "upstream reads every file, dot files too by default"

// dirDifferences are the directories, by name, whose domains floodgate
// loads otherwise than upstream's runner, with the reason, undocumented.
var dirDifferences = map[string]string{}

// TestUpstreamConfigDirs: envoyrls.LoadConfig loads the configuration
// directories of upstream's module, and directories of the test's own,
// as upstream's runner loads them (its file provider run on them): the
// same verdict, and the same domains.
func TestUpstreamConfigDirs(t *testing.T) {
	u := findUpstream(t)
	doc := envoyrlsDoc(t)
	documented := map[string]bool{}
	dirs := map[string]string{}
	for _, d := range []string{upstreamIntegrationDir, "examples/ratelimit/config", "test/config"} {
		dirs[d] = filepath.Join(u.dir, filepath.FromSlash(d))
	}
	for _, f := range dirFixtures {
		dir := filepath.Join(t.TempDir(), "runtime", "ratelimit", "config")
		for name, text := range f.files {
			path := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		dirs[f.name] = dir
		documented[f.name] = f.doc != "" && strings.Contains(doc, f.doc)
	}
	for _, name := range slices.Sorted(mapsKeys(dirs)) {
		t.Run(name, func(t *testing.T) {
			up, upErr := upstreamLoadDir(t, dirs[name])
			fg, fgErr := envoyrls.LoadConfig(dirs[name])
			var problem string
			switch {
			case (upErr == nil) != (fgErr == nil):
				problem = fmt.Sprintf("upstream %s, floodgate %s", verdict(upErr), verdict(fgErr))
			case upErr == nil && !slices.Equal(upstreamDomains(up), fg.Domains()):
				problem = fmt.Sprintf("upstream loads domains %v, floodgate %v", upstreamDomains(up), fg.Domains())
			}
			why, listed := dirDifferences[name]
			switch {
			case documented[name] && problem == "":
				t.Errorf("floodgate loads the directory as upstream's runner, though its documentation says otherwise")
			case documented[name]:
				t.Logf("a documented difference: %s", problem)
			case listed && problem == "":
				t.Errorf("floodgate now loads the directory as upstream: remove %q from dirDifferences (%s)", name, why)
			case listed:
				t.Logf("a known difference (%s): %s", why, problem)
			case problem != "":
				t.Error(problem)
			}
		})
	}
}
