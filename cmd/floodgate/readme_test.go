package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// block is a fenced block of the README: its language and its text.
type block struct{ lang, text string }

// recipe is a "###" section of the README's "## Recipes".
type recipe struct {
	name   string
	blocks []block
}

// readmeRecipes returns the recipes of the README in ../../README.md.
func readmeRecipes(t *testing.T) []recipe {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Recipes\n")
	if !ok {
		t.Fatal(`the README has no "## Recipes"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var recipes []recipe
	fence := regexp.MustCompile("(?ms)^```(\\w*)\n(.*?)^```$")
	for _, part := range strings.Split(section, "\n### ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		r := recipe{name: name}
		for _, m := range fence.FindAllStringSubmatch(body, -1) {
			r.blocks = append(r.blocks, block{m[1], m[2]})
		}
		recipes = append(recipes, r)
	}
	return recipes
}

// TestReadme runs each of the README's recipes as printed and compares
// what each command prints with the text block after it. The test changes
// only where the recipes would meet the machine: floodgate and the
// examples are built first (for `go run`), servers listen on free ports,
// and redis://127.0.0.1:6379 is a private redis-server.
func TestReadme(t *testing.T) {
	recipes := readmeRecipes(t)
	want := []string{"A shell script's flood guard", "Per-user limits in a Go service", "Shared limits on Redis",
		"The service behind Envoy", "Shaping like nginx"}
	var names []string
	for _, r := range recipes {
		names = append(names, r.name)
	}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Fatalf("the README's recipes %q, want %q", names, want)
	}
	for _, r := range recipes {
		t.Run(strings.ReplaceAll(r.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			newRecipeRun(t).run(t, r)
		})
	}
}

// recipeRun is the machine a recipe runs on: a directory, an environment
// and the substitutions of its addresses.
type recipeRun struct {
	dir   string
	env   []string
	ports map[string]string // the README's port: the test's
	redis string            // the private server's URL, made when a recipe names Redis
}

func newRecipeRun(t *testing.T) *recipeRun {
	dir := t.TempDir()
	bin := filepath.Dir(floodgateBinary(t))
	examplesOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, "peruser"), "../../examples/peruser").CombinedOutput()
		if err != nil {
			examplesErr = string(out) + err.Error()
		}
	})
	if examplesErr != "" {
		t.Fatal("building examples/peruser: ", examplesErr)
	}
	env := append(os.Environ(), serveEnvClean()...)
	env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "HOME="+dir,
		"XDG_STATE_HOME="+filepath.Join(dir, "state"), "FLOODGATE_STORE=")
	return &recipeRun{dir: dir, env: env, ports: map[string]string{}}
}

var (
	examplesOnce sync.Once
	examplesErr  string
)

// run runs r's blocks in order: a block of servers starts them, any other
// shell block runs, and its output must be the text block after it.
func (rr *recipeRun) run(t *testing.T, r recipe) {
	compared := 0
	for i, b := range r.blocks {
		switch {
		case b.lang == "go":
			if src, err := os.ReadFile("../../examples/peruser/main.go"); err != nil || !strings.Contains(string(src), b.text) {
				t.Errorf("the Go block is not part of examples/peruser/main.go (%v):\n%s", err, b.text)
			}
		case b.lang == "sh" && isServers(b.text):
			for _, line := range strings.Split(strings.TrimSpace(b.text), "\n") {
				rr.start(t, line)
			}
		case b.lang == "sh":
			out := rr.shell(t, b.text)
			if i+1 < len(r.blocks) && r.blocks[i+1].lang == "text" {
				if want := r.blocks[i+1].text; out != want {
					t.Errorf("%s printed\n%s\nwant\n%s", b.text, out, want)
				}
				compared++
			}
		}
	}
	if compared == 0 {
		t.Error("the recipe prints nothing the README shows")
	}
}

// isServers reports whether every line of a shell block starts a server.
func isServers(text string) bool {
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if !strings.HasPrefix(line, "go run ./examples/") && !strings.HasPrefix(line, "floodgate serve") {
			return false
		}
	}
	return true
}

// substitute puts the test's addresses and binaries in a line of the README.
func (rr *recipeRun) substitute(t *testing.T, s string) string {
	s = strings.ReplaceAll(s, "go run ./examples/peruser", "peruser")
	const redisURL = "redis://127.0.0.1:6379"
	if strings.Contains(s, redisURL) && rr.redis == "" {
		rr.redis = redistest.NewServer(t).URL()
	}
	parts := strings.Split(s, redisURL)
	for i, part := range parts {
		parts[i] = regexp.MustCompile(`127\.0\.0\.1:(\d+)`).ReplaceAllStringFunc(part, func(addr string) string {
			return "127.0.0.1:" + rr.port(t, strings.TrimPrefix(addr, "127.0.0.1:"))
		})
	}
	return strings.Join(parts, rr.redis)
}

// port is the free port the test uses for the README's port p.
func (rr *recipeRun) port(t *testing.T, p string) string {
	if q, ok := rr.ports[p]; ok {
		return q
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rr.ports[p] = strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	return rr.ports[p]
}

// start starts the server of a line of the README on its default ports
// (those the README names) and waits until it accepts connections.
func (rr *recipeRun) start(t *testing.T, line string) {
	line = strings.TrimSuffix(strings.TrimSpace(line), " &")
	addr := "127.0.0.1:8090" // examples/peruser's default
	switch {
	case strings.HasPrefix(line, "floodgate serve"):
		addr = "127.0.0.1:8080"
		line += " --http 127.0.0.1:8080 --grpc 127.0.0.1:8081 --metrics 127.0.0.1:6070"
	case strings.Contains(line, "-addr "):
		addr = regexp.MustCompile(`-addr (\S+)`).FindStringSubmatch(line)[1]
	default:
		line += " -addr " + addr
	}
	cmd := exec.Command("bash", "-c", "exec "+rr.substitute(t, line))
	cmd.Dir, cmd.Env = rr.dir, rr.env
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s:\n%s", line, &stderr)
		}
	})
	addr = rr.substitute(t, addr)
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s: %v", line, addr, err)
		}
		time.Sleep(20 * time.Millisecond) // a real process starting, not a clock
	}
}

// shell runs a shell block of the README and returns its standard output.
func (rr *recipeRun) shell(t *testing.T, text string) string {
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil && (tool == "bash" || strings.Contains(text, "curl ")) {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	cmd := exec.Command("bash", "-c", rr.substitute(t, text))
	cmd.Dir, cmd.Env = rr.dir, rr.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("%s: %v\n%s", text, err, &stderr)
	}
	return string(out)
}

// Every relative link of the README, the CHANGELOG and the docs names a
// file or directory that exists.
func TestDocLinks(t *testing.T) {
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, doc := range append(docs, "../../README.md", "../../CHANGELOG.md") {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(data), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", strings.TrimPrefix(doc, "../../"), m[1])
			}
		}
	}
}

// The guide's configuration file serves as printed.
func TestGuideConfig(t *testing.T) {
	data, err := os.ReadFile("../../docs/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?ms)^```yaml\n(.*?)^```$").FindStringSubmatch(string(data))
	if m == nil {
		t.Fatal("docs/guide.md has no YAML block")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "floodgate.yaml")
	if err := os.WriteFile(cfg, []byte(m[1]), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, []string{"XDG_STATE_HOME=" + dir}, "--config", cfg)
	if code, d := call(t, "POST", p.url("/v1/check"), `{"policy":"per-user","key":"u42"}`); code != 200 || d["remaining"] != 19.0 {
		t.Errorf("a check of the guide's per-user policy: %d %v", code, d)
	}
}
