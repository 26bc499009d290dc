package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/envoyproxy/ratelimit/src/config"
	"github.com/envoyproxy/ratelimit/src/settings"
	"github.com/envoyproxy/ratelimit/src/stats"
	gostats "github.com/lyft/gostats"

	"github.com/floodgate/floodgate/envoyrls"
)

// The upstream suite: envoyproxy/ratelimit's own configuration files and
// the expectations of its integration test, read at test time from the Go
// module cache (the version bench requires, EnvoyRateLimitVersion), held
// against floodgate's envoyrls. Upstream's verdicts and answers come from
// upstream's own code, run in this process: its configuration loader for
// what it loads and refuses, its service on a real redis-server for what
// it answers. Nothing of upstream's is copied into this repository.

// upstreamModule is github.com/envoyproxy/ratelimit in the module cache.
type upstreamModule struct{ dir string }

// findUpstream asks the go command where the module is, as bench's go.mod
// requires it, and fails t when it is not EnvoyRateLimitVersion or not
// downloaded.
func findUpstream(t testing.TB) upstreamModule {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		goCmd = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	out, err := exec.Command(goCmd, "list", "-m", "-json", "github.com/envoyproxy/ratelimit").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/envoyproxy/ratelimit: %v", err)
	}
	var m struct{ Version, Dir string }
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("go list -m -json: %v", err)
	}
	if m.Version != EnvoyRateLimitVersion {
		t.Fatalf("bench requires github.com/envoyproxy/ratelimit %s, EnvoyRateLimitVersion says %s", m.Version, EnvoyRateLimitVersion)
	}
	if m.Dir == "" {
		t.Fatalf("github.com/envoyproxy/ratelimit %s is not in the module cache: run go mod download in bench", m.Version)
	}
	return upstreamModule{m.Dir}
}

// yamlFiles returns the module's YAML files, as paths relative to its
// directory, sorted, and then the YAML blocks of its README as
// README.md#1, README.md#2...
func (u upstreamModule) yamlFiles(t testing.TB) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(u.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			rel, err := filepath.Rel(u.dir, path)
			files = append(files, filepath.ToSlash(rel))
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	for i := range u.readmeBlocks(t) {
		files = append(files, fmt.Sprintf("%s%d", readmeBlock, i+1))
	}
	return files
}

// readmeBlock begins the names of the README's YAML blocks.
const readmeBlock = "README.md#"

// readmeBlocks returns the YAML code blocks of the module's README, in
// order.
func (u upstreamModule) readmeBlocks(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(u.dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var block *strings.Builder
	for line := range strings.Lines(string(data)) {
		switch fence := strings.TrimSpace(line); {
		case block == nil && (fence == "```yaml" || fence == "```yml"):
			block = new(strings.Builder)
		case block != nil && fence == "```":
			blocks = append(blocks, block.String())
			block = nil
		case block != nil:
			block.WriteString(line)
		}
	}
	return blocks
}

// read returns the named files' contents, keyed by their names.
func (u upstreamModule) read(t testing.TB, names ...string) map[string][]byte {
	t.Helper()
	files := make(map[string][]byte, len(names))
	for _, name := range names {
		if n, ok := strings.CutPrefix(name, readmeBlock); ok {
			var i int
			fmt.Sscan(n, &i)
			files[name] = []byte(u.readmeBlocks(t)[i-1])
			continue
		}
		data, err := os.ReadFile(filepath.Join(u.dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = data
	}
	return files
}

// upstreamLoad loads files with upstream's loader, as its runner does
// (domains not merged, its default), in the order of their names.
// Upstream's loader panics on a bad file: upstreamLoad returns that as an
// error.
func upstreamLoad(files map[string][]byte) (cfg config.RateLimitConfig, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, fmt.Errorf("%v", r)
		}
	}()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	loads := make([]config.RateLimitConfigToLoad, len(names))
	for i, name := range names {
		loads[i] = config.RateLimitConfigToLoad{Name: name, ConfigYaml: config.ConfigFileContentToYaml(name, string(files[name]))}
	}
	return config.NewRateLimitConfigImpl(loads, upstreamStats(), false), nil
}

// upstreamStats is a statistics manager for upstream's code that keeps
// nothing.
func upstreamStats() stats.Manager {
	return stats.NewStatManager(gostats.NewStore(gostats.NewNullSink(), false), settings.NewSettings())
}

// A fileSet is a set of upstream's files loaded together.
type fileSet struct {
	name  string   // for the test's name
	files []string // relative to the module's directory
}

// upstreamFileSets are each YAML file of the module (and YAML block of its
// README) alone, each directory's YAML files together (as upstream's
// runner loads a directory), and the pairs that upstream's own
// configuration test loads together.
func upstreamFileSets(t testing.TB, u upstreamModule) []fileSet {
	files := u.yamlFiles(t)
	var sets []fileSet
	dirs := map[string][]string{}
	for _, f := range files {
		sets = append(sets, fileSet{f, []string{f}})
		if !strings.HasPrefix(f, readmeBlock) {
			dirs[filepath.ToSlash(filepath.Dir(f))] = append(dirs[filepath.ToSlash(filepath.Dir(f))], f)
		}
	}
	for _, dir := range slices.Sorted(mapsKeys(dirs)) {
		if len(dirs[dir]) > 1 {
			sets = append(sets, fileSet{dir + "/", dirs[dir]})
		}
	}
	for _, pair := range [][]string{
		{"test/config/basic_config.yaml", "test/config/duplicate_domain.yaml"},
		{"test/config/merge_domain_key1.yaml", "test/config/merge_domain_key2.yaml"},
	} {
		sets = append(sets, fileSet{strings.Join(pair, "+"), pair})
	}
	return sets
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// verdictDifferences are the file sets on which floodgate's verdict is not
// upstream's, each with the reason. The test fails when one of them agrees
// (the entry is stale) or when another disagrees.
var verdictDifferences = map[string]string{}

// TestUpstreamConfigFiles: floodgate loads each file (and set of files)
// of upstream's module that upstream's loader loads, and refuses each that
// it refuses.
func TestUpstreamConfigFiles(t *testing.T) {
	u := findUpstream(t)
	loaded, refused := 0, 0
	for _, set := range upstreamFileSets(t, u) {
		t.Run(set.name, func(t *testing.T) {
			files := u.read(t, set.files...)
			_, upErr := upstreamLoad(files)
			_, fgErr := envoyrls.ParseConfig(files)
			if fgErr != nil && !errors.Is(fgErr, envoyrls.ErrInvalidConfig) {
				t.Errorf("floodgate's error does not wrap ErrInvalidConfig: %v", fgErr)
			}
			agree := (upErr == nil) == (fgErr == nil)
			why, listed := verdictDifferences[set.name]
			switch {
			case agree && listed:
				t.Errorf("floodgate now agrees with upstream (%s): remove %q from verdictDifferences (%s)", verdict(upErr), set.name, why)
			case !agree && !listed:
				t.Errorf("upstream %s, floodgate %s", verdict(upErr), verdict(fgErr))
			case !agree:
				t.Logf("a known difference (%s): upstream %s, floodgate %s", why, verdict(upErr), verdict(fgErr))
			}
			if upErr == nil {
				loaded++
			} else {
				refused++
			}
		})
	}
	t.Logf("upstream loads %d file sets and refuses %d", loaded, refused)
}

func verdict(err error) string {
	if err == nil {
		return "loads"
	}
	return "refuses: " + err.Error()
}
