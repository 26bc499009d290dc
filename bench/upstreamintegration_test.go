package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/redistest"
)

// upstreamIntegrationDir is where upstream's integration test keeps the
// configuration its service loads, and reloadFile the file it adds to
// that directory to test reloading.
const (
	upstreamIntegrationDir = "test/integration/runtime/current/ratelimit/config"
	upstreamReloadFile     = "test/integration/runtime/current/ratelimit/reload.yaml"
)

// integrationFiles are the names of the files of upstreamIntegrationDir.
func (u upstreamModule) integrationFiles(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(u.dir, filepath.FromSlash(upstreamIntegrationDir)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext == ".yaml" || ext == ".yml" {
			names = append(names, upstreamIntegrationDir+"/"+e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatalf("no configuration in %s", upstreamIntegrationDir)
	}
	return names
}

// status writes one descriptor status as summarize does: code, then the
// limit (when limit is not ""), the hits remaining (when not 0) and the
// time until the window resets (when reset is not 0).
func status(code, limit string, remaining int, reset time.Duration) string {
	s := code
	if limit != "" {
		s += " " + limit
	}
	if remaining != 0 {
		s += fmt.Sprintf(" r=%d", remaining)
	}
	if reset != 0 {
		s += fmt.Sprintf(" t=%v", reset)
	}
	return s
}

// answer writes a whole answer as summarize does.
func answer(code string, statuses ...string) string {
	return code + ": " + strings.Join(statuses, " | ")
}

// upstreamIntegrationScenarios are the requests of upstream's integration
// test (test/integration/integration_test.go) on its configuration, in its
// order, each with the answer that test expects, in its default settings
// (one Redis, no local cache, counters incremented over the limit).
// Where that test accepts several answers (OK or OVER_LIMIT) or checks
// only an order (a reset that got shorter), the answer here is the one the
// fake clock makes exact. Its checks of statistics, TLS, authentication,
// Memcache, Redis Cluster and Sentinel, and xDS are not about answers and
// have no counterpart here; nor do its variants with a local cache or
// with STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT, settings floodgate does
// not have (envoyrls's package documentation).
func upstreamIntegrationScenarios(integration, withReload map[string][]byte) map[string][]step {
	return map[string][]step{"basic": basicScenario(), "reload": reloadScenario(integration, withReload),
		"share_threshold": shareThresholdScenario()}
}

// basicScenario is testBasicBaseConfig's requests: an unknown domain, a
// limit per second, a minute's limit and past it, two descriptors of which
// one goes over, and a day's reset that gets shorter.
func basicScenario() []step {
	steps := []step{
		{domain: "foo", descs: [][]string{{"hello", "world"}}, want: answer("OK", "OK")},
		{domain: "basic", descs: [][]string{{"key1", "foo"}}, want: answer("OK", status("OK", "50/SECOND", 49, time.Second))},
	}
	for i := range 25 {
		want := answer("OK", status("OK", "20/MINUTE", 20-(i+1), time.Minute))
		if i >= 20 {
			want = answer("OVER_LIMIT", status("OVER_LIMIT", "20/MINUTE", 0, time.Minute))
		}
		steps = append(steps, step{domain: "another", descs: [][]string{{"key2", "r1"}}, want: want})
	}
	for i := range 15 {
		code, code2, rem2 := "OK", "OK", 10-(i+1)
		if i >= 10 {
			code, code2, rem2 = "OVER_LIMIT", "OVER_LIMIT", 0
		}
		steps = append(steps, step{domain: "another", descs: [][]string{{"key2", "r2"}, {"key3", "r2"}},
			want: answer(code, status("OK", "20/MINUTE", 20-(i+1), time.Minute), status(code2, "10/HOUR", rem2, time.Hour))})
	}
	const day = 24 * time.Hour
	return append(steps,
		step{domain: "another", descs: [][]string{{"key4", "durTest"}}, want: answer("OK", status("OK", "20/DAY", 19, day))},
		step{after: 2 * time.Second, domain: "another", descs: [][]string{{"key4", "durTest"}},
			want: answer("OK", status("OK", "20/DAY", 18, day-2*time.Second))},
	)
}

// reloadScenario is testConfigReload's requests: a domain before its file
// is added, after, and (not in upstream's test) after it is removed again.
func reloadScenario(integration, withReload map[string][]byte) []step {
	return []step{
		{domain: "reload", descs: [][]string{{"block", "foo"}}, want: answer("OK", "OK")},
		{config: withReload, domain: "reload", descs: [][]string{{"key1", "foo"}}, want: answer("OK", status("OK", "50/SECOND", 49, time.Second))},
		{domain: "reload", descs: [][]string{{"block", "foo"}}},
		{config: integration, domain: "reload", descs: [][]string{{"key1", "foo"}}},
	}
}

// shareThresholdScenario is testShareThreshold's requests: values of a
// wildcard that share one limit, then values of one that do not.
func shareThresholdScenario() []step {
	var steps []step
	for i := range 10 {
		steps = append(steps, step{domain: "share-threshold-test", descs: [][]string{{"files", "files/a.pdf"}},
			want: answer("OK", status("OK", "10/HOUR", 10-(i+1), time.Hour))})
	}
	steps = append(steps, step{domain: "share-threshold-test", descs: [][]string{{"files", "files/b.csv"}},
		want: answer("OVER_LIMIT", status("OVER_LIMIT", "10/HOUR", 0, time.Hour))})
	for i := range 10 {
		steps = append(steps, step{domain: "share-threshold-test", descs: [][]string{{"files_no_share", fmt.Sprintf("files_no_share/%d", i)}},
			want: answer("OK", status("OK", "10/HOUR", 9, time.Hour))})
	}
	return steps
}

// answerDifferences are the known differences between floodgate's and
// upstream's answers to upstream's integration requests.
var answerDifferences = newKnown()

// A difference is a known difference between floodgate's answers and
// upstream's: the reason (work not done yet, with who does it) and the
// steps it explains. A difference that explains no differing step is
// stale, and fails the test, so that the list only shrinks.
//
// doc, when not "", is the phrase of envoyrls's documentation that makes
// it a deliberate difference; then the test fails when the phrase is gone
// too.
type difference struct {
	why, doc string
	applies  func(scenario string, s step) bool
}

// known is a list of differences, with how many steps each applied to and
// explained (differed on) in one test.
type known struct {
	list               []difference
	applied, explained []int
}

func newKnown(list ...difference) *known {
	return &known{list, make([]int, len(list)), make([]int, len(list))}
}

// find returns the index of the difference that explains s, or -1.
func (k *known) find(scenario string, s step) int {
	return slices.IndexFunc(k.list, func(d difference) bool { return d.applies(scenario, s) })
}

// check fails t for each difference that explained none of the steps it
// applied to since the last check, logs the others, and starts the counts
// afresh.
func (k *known) check(t testing.TB) {
	t.Helper()
	doc := envoyrlsDoc(t)
	for i, d := range k.list {
		switch {
		case d.doc != "" && !strings.Contains(doc, d.doc):
			t.Errorf("envoyrls's documentation no longer says %q: floodgate must answer as upstream (%s)", d.doc, d.why)
		case k.explained[i] > 0:
			kind := "a known difference"
			if d.doc != "" {
				kind = "a documented difference"
			}
			t.Logf("%s, on %d of the %d steps it applies to: %s", kind, k.explained[i], k.applied[i], d.why)
		case k.applied[i] > 0:
			t.Errorf("floodgate now answers as it should the %d steps of a known difference: remove it (%s)", k.applied[i], d.why)
		}
		k.applied[i], k.explained[i] = 0, 0
	}
}

// upstreamVariants are the settings of upstream's that its integration
// test's TestBasicConfig runs its requests under besides the default, and
// floodgate has no need of (each Redis client is on the same redis-server
// here).
var upstreamVariants = []upstreamVariant{
	{name: "per-second Redis", perSecond: true},
	{name: "local cache", localCache: 1000},
	{name: "per-second Redis and local cache", perSecond: true, localCache: 1000},
}

// TestUpstreamIntegration: floodgate's envoyrls, on its memory store and
// on a real redis-server, answers the requests of upstream's integration
// test as that test expects and as upstream's own service answers them,
// all reading one fake clock; and upstream under the variants of its
// settings its test runs answers them the same.
func TestUpstreamIntegration(t *testing.T) {
	u := findUpstream(t)
	srv := redistest.NewServer(t)
	names := u.integrationFiles(t)
	integration := u.read(t, names...)
	withReload := u.read(t, append(names, upstreamReloadFile)...)
	for name, steps := range upstreamIntegrationScenarios(integration, withReload) {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(suiteT0)
			runSteps(t, name, newPeers(t, srv, clk, integration), clk, steps, answerDifferences)
		})
	}
	answerDifferences.check(t)
	for _, v := range upstreamVariants {
		for name, steps := range upstreamIntegrationScenarios(integration, withReload) {
			t.Run(v.name+"/"+name, func(t *testing.T) {
				clk := clock.NewFake(suiteT0)
				runSteps(t, name, []peer{newUpstreamPeer(t, srv, v, clk, integration)}, clk, steps, newKnown())
			})
		}
	}
}

// TestUpstreamJSON: as TestUpstreamIntegration, over the HTTP form of the
// services (POST /json): the same answers, decoded from their JSON, with status
// 200 for OK and 429 for OVER_LIMIT.
func TestUpstreamJSON(t *testing.T) {
	u := findUpstream(t)
	srv := redistest.NewServer(t)
	names := u.integrationFiles(t)
	integration := u.read(t, names...)
	withReload := u.read(t, append(names, upstreamReloadFile)...)
	for name, steps := range upstreamIntegrationScenarios(integration, withReload) {
		t.Run(name, func(t *testing.T) {
			for i := range steps {
				steps[i].overJSON = true
			}
			clk := clock.NewFake(suiteT0)
			runSteps(t, name, newPeers(t, srv, clk, integration), clk, steps, answerDifferences)
		})
	}
	answerDifferences.check(t)
}

// runSteps sends each step to every peer, the last being upstream's
// reference, and checks the answers: upstream's is the step's want, when
// it has one, and every other peer's is the step's fgWant when it has
// one, else upstream's, unless one of kn explains the step (kn counts
// that: see known.check).
func runSteps(t *testing.T, scenario string, peers []peer, clk *clock.Fake, steps []step, kn *known) {
	t.Helper()
	others := peers[:len(peers)-1]
	for i, s := range steps {
		clk.Advance(s.after)
		if s.config != nil {
			for _, p := range peers {
				p.setConfig(t, s.config)
			}
		}
		id := fmt.Sprintf("%s/%d", scenario, i)
		answers := askAll(peers, s)
		up := answers[len(answers)-1]
		if s.want != "" && up != s.want {
			t.Errorf("step %s, %v: upstream answers\n  %s\nwhere its test expects\n  %s", id, s, up, s.want)
		}
		want := up
		if s.fgWant != "" {
			want = s.fgWant
		}
		k := kn.find(scenario, s)
		differ := false
		for j, p := range others {
			if got := answers[j]; got != want {
				differ = true
				if k < 0 {
					t.Errorf("step %s, %v:\n %-16s %s\n %-16s %s", id, s, p.name, got, "want", want)
				}
			}
		}
		if k >= 0 {
			kn.applied[k]++
			if differ {
				kn.explained[k]++
			}
		}
	}
}
