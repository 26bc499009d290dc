package bench

import (
	"fmt"
	"os"
	"path/filepath"
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
func upstreamIntegrationScenarios(integration, withReload []string) map[string][]step {
	const sec, min, hour, day = time.Second, time.Minute, time.Hour, 24 * time.Hour
	basic := []step{
		{domain: "foo", descs: [][]string{{"hello", "world"}}, want: answer("OK", "OK")},
		{domain: "basic", descs: [][]string{{"key1", "foo"}}, want: answer("OK", status("OK", "50/SECOND", 49, sec))},
	}
	for i := range 25 {
		want := answer("OK", status("OK", "20/MINUTE", 20-(i+1), min))
		if i >= 20 {
			want = answer("OVER_LIMIT", status("OVER_LIMIT", "20/MINUTE", 0, min))
		}
		basic = append(basic, step{domain: "another", descs: [][]string{{"key2", "r1"}}, want: want})
	}
	for i := range 15 {
		code, code2, rem2 := "OK", "OK", 10-(i+1)
		if i >= 10 {
			code, code2, rem2 = "OVER_LIMIT", "OVER_LIMIT", 0
		}
		basic = append(basic, step{domain: "another", descs: [][]string{{"key2", "r2"}, {"key3", "r2"}},
			want: answer(code, status("OK", "20/MINUTE", 20-(i+1), min), status(code2, "10/HOUR", rem2, hour))})
	}
	basic = append(basic,
		step{domain: "another", descs: [][]string{{"key4", "durTest"}}, want: answer("OK", status("OK", "20/DAY", 19, day))},
		step{after: 2 * sec, domain: "another", descs: [][]string{{"key4", "durTest"}}, want: answer("OK", status("OK", "20/DAY", 18, day-2*sec))},
	)

	reload := []step{
		{domain: "reload", descs: [][]string{{"block", "foo"}}, want: answer("OK", "OK")},
		{config: withReload, domain: "reload", descs: [][]string{{"key1", "foo"}}, want: answer("OK", status("OK", "50/SECOND", 49, sec))},
		{domain: "reload", descs: [][]string{{"block", "foo"}}}, // not in upstream's test
		{config: integration, domain: "reload", descs: [][]string{{"key1", "foo"}}},
	}

	var share []step
	for i := range 10 {
		share = append(share, step{domain: "share-threshold-test", descs: [][]string{{"files", "files/a.pdf"}},
			want: answer("OK", status("OK", "10/HOUR", 10-(i+1), hour))})
	}
	share = append(share, step{domain: "share-threshold-test", descs: [][]string{{"files", "files/b.csv"}},
		want: answer("OVER_LIMIT", status("OVER_LIMIT", "10/HOUR", 0, hour))})
	for i := range 10 {
		share = append(share, step{domain: "share-threshold-test", descs: [][]string{{"files_no_share", fmt.Sprintf("files_no_share/%d", i)}},
			want: answer("OK", status("OK", "10/HOUR", 9, hour))})
	}

	// Not in upstream's integration test: the requests its service
	// refuses (checkServiceErr in src/service/ratelimit.go).
	refused := []step{
		{domain: "", descs: [][]string{{"key1", "foo"}}},
		{domain: "basic"},
	}
	return map[string][]step{"basic": basic, "reload": reload, "share_threshold": share, "refused": refused}
}

// answerDifferences are the steps, named "scenario/index", on which
// floodgate answers otherwise than upstream, each with the reason: a
// deliberate difference of envoyrls's package documentation, or work not
// done yet. The test fails when one of them agrees (the entry is stale)
// or when another step differs.
var answerDifferences = map[string]string{}

// TestUpstreamIntegration: floodgate's envoyrls, on its memory store and
// on a real redis-server, answers the requests of upstream's integration
// test as that test expects and as upstream's own service answers them,
// all reading one fake clock.
func TestUpstreamIntegration(t *testing.T) {
	u := findUpstream(t)
	srv := redistest.NewServer(t)
	integration := u.integrationFiles(t)
	withReload := append(append([]string(nil), integration...), upstreamReloadFile)
	for name, steps := range upstreamIntegrationScenarios(integration, withReload) {
		t.Run(name, func(t *testing.T) {
			clk := clock.NewFake(suiteT0)
			peers := newPeers(t, srv, clk, u.read(t, integration...))
			runSteps(t, u, name, peers, clk, steps, answerDifferences)
		})
	}
}

// runSteps sends each step to every peer, the first being upstream's
// reference, and checks the answers: upstream's is the step's want, when
// it has one, and every other peer's is upstream's, unless the step is
// listed in known ("scenario/index") with the reason why not.
func runSteps(t *testing.T, u upstreamModule, scenario string, peers []peer, clk *clock.Fake, steps []step, known map[string]string) {
	t.Helper()
	ref, others := peers[len(peers)-1], peers[:len(peers)-1]
	for i, s := range steps {
		clk.Advance(s.after)
		if s.config != nil {
			files := u.read(t, s.config...)
			for _, p := range peers {
				p.setConfig(t, files)
			}
		}
		id := fmt.Sprintf("%s/%d", scenario, i)
		want := ask(ref, s)
		if s.want != "" && want != s.want {
			t.Errorf("step %s, %v: upstream answers\n  %s\nwhere its test expects\n  %s", id, s, want, s.want)
		}
		differ := false
		for _, p := range others {
			if got := ask(p, s); got != want {
				differ = true
				if _, ok := known[id]; !ok {
					t.Errorf("step %s, %v:\n %-16s %s\n %-16s %s", id, s, p.name, got, ref.name, want)
				}
			}
		}
		why, listed := known[id]
		switch {
		case listed && !differ:
			t.Errorf("step %s now answers as upstream: remove it from the list of differences (%s)", id, why)
		case listed:
			t.Logf("step %s, %v: a known difference: %s", id, s, why)
		}
	}
}
