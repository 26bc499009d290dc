package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/envoyrls"
	"github.com/floodgate/floodgate/internal/redistest"
)

// A fixture is a configuration of this test's own with the verdicts and
// answers it should get. doc, when not "", is the phrase of envoyrls's
// package documentation that makes floodgate differ from upstream on it on
// purpose: while the documentation says so, floodgate's verdict is
// fgLoads and its answers are the steps' fgWant; once the phrase is gone,
// floodgate must do as upstream does.
type fixture struct {
	name             string
	doc              string
	files            map[string]string
	upLoads, fgLoads bool
	steps            []step
	opts             []envoyrls.Option // floodgate's, for newerFeatures
}

func (f fixture) bytes() map[string][]byte {
	files := make(map[string][]byte, len(f.files))
	for name, text := range f.files {
		files[name] = []byte(text)
	}
	return files
}

// oneFile is a fixture's files when it has one.
func oneFile(text string) map[string]string { return map[string]string{"fixture.yaml": text} }

const twoPerMinute = "domain: doc\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"

// documentedDifferences are the differences from upstream that envoyrls's
// package documentation lists, each as a fixture on which upstream's own
// loader and service (at the module's version) and floodgate must do what
// the documentation says.
var documentedDifferences = []fixture{
	{name: "error codes", doc: "where upstream answers codes.Unknown",
		files: oneFile(twoPerMinute), upLoads: true, fgLoads: true, steps: []step{
			// The requests upstream's service refuses (checkServiceErr in
			// src/service/ratelimit.go), over gRPC and POST /json.
			{domain: "", descs: [][]string{{"k", "a"}},
				want:   "error: Unknown: rate limit domain must not be empty",
				fgWant: "error: InvalidArgument: rate limit domain must not be empty"},
			{domain: "doc",
				want:   "error: Unknown: rate limit descriptor list must not be empty",
				fgWant: "error: InvalidArgument: rate limit descriptor list must not be empty"},
			{domain: "", descs: [][]string{{"k", "a"}}, overJSON: true, want: "error: HTTP 400"},
			{domain: "doc", overJSON: true, want: "error: HTTP 400"},
		}},
	// A check past the limit, a key ending in '*' and a rule changed by a
	// reload were differences until envoyrls counted fixed windows per
	// descriptor and matched '*' anywhere: their fixtures, without doc,
	// hold it to upstream now.
	{name: "a check past the limit",
		files: oneFile(twoPerMinute), upLoads: true, fgLoads: true, steps: []step{
			{domain: "doc", descs: [][]string{{"k", "a"}}, hits: 3, want: answer("OVER_LIMIT", status("OVER_LIMIT", "2/MINUTE", 0, time.Minute))},
			{domain: "doc", descs: [][]string{{"k", "a"}}, descHits: map[int]uint64{0: 0},
				want: answer("OVER_LIMIT", status("OVER_LIMIT", "2/MINUTE", 0, time.Minute))},
		}},
	{name: "keys and values joined by '_'", doc: "key a_b value c taken for key a value b_c",
		files:   oneFile("domain: doc\ndescriptors:\n  - key: a\n    value: b_c\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"),
		upLoads: true, fgLoads: true, steps: []step{
			{domain: "doc", descs: [][]string{{"a_b", "c"}}, want: answer("OK", status("OK", "2/MINUTE", 1, time.Minute)), fgWant: answer("OK", "OK")},
		}},
	{name: "a key ending in '*'",
		files:   oneFile("domain: doc\ndescriptors:\n  - key: pre*\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"),
		upLoads: true, fgLoads: true, steps: []step{
			{domain: "doc", descs: [][]string{{"prefix", "v"}}, want: answer("OK", status("OK", "2/MINUTE", 1, time.Minute))},
		}},
	// requests_per_unit over 10^9 was a difference until algo.MaxLimit
	// rose to 10^15: up to 2^32-1, a uint32's most, both load it and
	// count alike; past it neither loads.
	{name: "requests_per_unit over 10^9",
		files:   oneFile("domain: doc\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967295}\n"),
		upLoads: true, fgLoads: true, steps: []step{
			{domain: "doc", descs: [][]string{{"k", "a"}}, want: answer("OK", status("OK", "4294967295/SECOND", 4294967294, time.Second))},
		}},
	{name: "requests_per_unit past a uint32",
		files:   oneFile("domain: doc\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n"),
		upLoads: false, fgLoads: false},
	{name: "an override's unit_multiplier", doc: "a limit override's unit_multiplier is honoured",
		files: oneFile(twoPerMinute), upLoads: true, fgLoads: true, steps: []step{
			{domain: "doc", descs: [][]string{{"free", "x"}}, override: map[int]string{0: "3/MINUTEx2"},
				want:   answer("OK", status("OK", "3/MINUTE", 2, time.Minute)),
				fgWant: answer("OK", status("OK", "3/MINUTEx2", 2, 2*time.Minute))},
		}},
	{name: "a rule changed by a reload",
		files: oneFile(twoPerMinute), upLoads: true, fgLoads: true, steps: []step{
			{domain: "doc", descs: [][]string{{"k", "a"}}, want: answer("OK", status("OK", "2/MINUTE", 1, time.Minute))},
			{config: map[string][]byte{"fixture.yaml": []byte(strings.Replace(twoPerMinute, "2}", "5}", 1))},
				domain: "doc", descs: [][]string{{"k", "a"}},
				want: answer("OK", status("OK", "5/MINUTE", 3, time.Minute))},
		}},
	{name: "several YAML documents", doc: "A file of more than one YAML document is an error too",
		files: oneFile(twoPerMinute + "---\ndomain: other\n"), upLoads: true, fgLoads: false},
	{name: "quota mode", doc: "quota_mode answers as upstream's main branch does; the version the Go module proxy serves",
		files:   oneFile("domain: doc\ndescriptors:\n  - key: k\n    quota_mode: true\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"),
		upLoads: true, fgLoads: true, steps: []step{
			{domain: "doc", descs: [][]string{{"k", "a"}}, want: answer("OK", status("OK", "2/MINUTE", 1, time.Minute))},
			{domain: "doc", descs: [][]string{{"k", "a"}}, want: answer("OK", status("OK", "2/MINUTE", 0, time.Minute))},
			// Over the limit in quota mode: OK, without a reset, at the
			// proxy's version; the main branch's overall code is
			// OVER_LIMIT when every quota is over (newerFeatures).
			{domain: "doc", descs: [][]string{{"k", "a"}}, want: answer("OK", status("OK", "2/MINUTE", 0, 0)),
				fgWant: answer("OVER_LIMIT", status("OVER_LIMIT", "2/MINUTE", 0, time.Minute))},
		}},
	{name: "a key in the wrong place", doc: "so it accepts a key in the wrong place",
		files:   oneFile("domain: doc\ndescriptors:\n  - key: k\n    unit: minute\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"),
		upLoads: true, fgLoads: false},
}

// envoyrlsDoc is envoyrls's package documentation, read from its source.
func envoyrlsDoc(t testing.TB) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "envoyrls", "doc.go"))
	if err != nil {
		t.Fatal(err)
	}
	// The phrases may wrap: compare with the comment markers and line
	// breaks gone.
	return strings.Join(strings.Fields(strings.ReplaceAll(string(data), "//", " ")), " ")
}

// TestUpstreamDocumentedDifferences: each difference from upstream that
// envoyrls's documentation lists is one, on upstream's own loader and
// service and on floodgate's; and once the documentation no longer lists
// it, floodgate does as upstream.
func TestUpstreamDocumentedDifferences(t *testing.T) {
	doc := envoyrlsDoc(t)
	srv := redistest.NewServer(t)
	for _, f := range documentedDifferences {
		t.Run(f.name, func(t *testing.T) {
			if !strings.Contains(doc, f.doc) {
				t.Logf("envoyrls's documentation no longer says %q: floodgate must do as upstream", f.doc)
				f.fgLoads = f.upLoads
				for i := range f.steps {
					f.steps[i].fgWant = ""
				}
			}
			checkVerdicts(t, f)
			if len(f.steps) == 0 || !f.upLoads {
				return
			}
			clk := clock.NewFake(suiteT0)
			var peers []peer
			if f.fgLoads {
				peers = newPeers(t, srv, clk, f.bytes())
			} else { // upstream's answers only
				peers = []peer{newUpstreamPeer(t, srv, upstreamVariant{}, clk, f.bytes())}
			}
			runSteps(t, f.name, peers, clk, f.steps, newKnown())
		})
	}
}

// checkVerdicts checks that upstream's loader and floodgate's load f or
// refuse it as f says.
func checkVerdicts(t *testing.T, f fixture) {
	t.Helper()
	if _, err := upstreamLoad(f.bytes()); (err == nil) != f.upLoads {
		t.Errorf("upstream %s", verdict(err))
	}
	_, err := envoyrls.ParseConfig(f.bytes())
	if (err == nil) != f.fgLoads {
		t.Errorf("floodgate %s", verdict(err))
	}
	if err != nil && !errors.Is(err, envoyrls.ErrInvalidConfig) {
		t.Errorf("floodgate's error does not wrap ErrInvalidConfig: %v", err)
	}
}

// newerFeatures are fixtures for what upstream's main branch does beyond
// the version the module proxy serves, as its README, tests and source
// describe it: a '*' anywhere in a value (README, example 9; test/config/
// wildcard.yaml and share_threshold.yaml), quota mode's overall code
// (src/service/ratelimit.go; the proxy's version answers a quota's
// status OK instead), and a descriptor's metadata (test/config/
// metadata.yaml), which changes no answer unless upstream's
// RESPONSE_DYNAMIC_METADATA is set (envoyrls.WithDynamicMetadata). Upstream's code at that version is
// not in the module cache: the answers are written out, and only
// floodgate is asked.
var newerFeatures = []fixture{
	{name: "wildcards anywhere", fgLoads: true, files: oneFile(`domain: newer
descriptors:
  - key: path
    value: /v1/*/orders
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: route
    value: svc-*-rpc-*
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: host
    value: shard-*.internal
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 2}
`), steps: []step{
		{domain: "newer", descs: [][]string{{"path", "/v1/42/orders"}}, want: answer("OK", status("OK", "2/MINUTE", 1, time.Minute))},
		{domain: "newer", descs: [][]string{{"path", "/v1/42/orders"}}, want: answer("OK", status("OK", "2/MINUTE", 0, time.Minute))},
		{domain: "newer", descs: [][]string{{"path", "/v1/42/orders"}}, want: answer("OVER_LIMIT", status("OVER_LIMIT", "2/MINUTE", 0, time.Minute))},
		{domain: "newer", descs: [][]string{{"path", "/v1/7/orders"}}, want: answer("OK", status("OK", "2/MINUTE", 1, time.Minute))},
		{domain: "newer", descs: [][]string{{"path", "/v1//orders"}}, want: answer("OK", status("OK", "2/MINUTE", 1, time.Minute))},
		{domain: "newer", descs: [][]string{{"path", "/v1/42/other"}}, want: answer("OK", "OK")},
		{domain: "newer", descs: [][]string{{"route", "svc-a-rpc-b"}}, want: answer("OK", status("OK", "3/MINUTE", 2, time.Minute))},
		{domain: "newer", descs: [][]string{{"route", "svc-a-rpc-"}}, want: answer("OK", status("OK", "3/MINUTE", 2, time.Minute))},
		{domain: "newer", descs: [][]string{{"route", "svc-a-grpc"}}, want: answer("OK", "OK")},
		{domain: "newer", descs: [][]string{{"host", "shard-1.internal"}}, want: answer("OK", status("OK", "2/HOUR", 1, time.Hour))},
		{domain: "newer", descs: [][]string{{"host", "shard-2.internal"}}, want: answer("OK", status("OK", "2/HOUR", 0, time.Hour))},
		{domain: "newer", descs: [][]string{{"host", "shard-3.internal"}}, want: answer("OVER_LIMIT", status("OVER_LIMIT", "2/HOUR", 0, time.Hour))},
		{domain: "newer", descs: [][]string{{"host", "shard-1.external"}}, want: answer("OK", "OK")},
	}},
	{name: "quota mode", fgLoads: true, files: oneFile(`domain: newer
descriptors:
  - key: primary
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: backup
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
`), steps: []step{
		// Statuses as usual; the overall code OVER_LIMIT only when every
		// descriptor in quota mode is over (src/service/ratelimit.go).
		{domain: "newer", descs: [][]string{{"primary", "a"}, {"backup", "a"}},
			want: answer("OK", status("OK", "1/MINUTE", 0, time.Minute), status("OK", "2/MINUTE", 1, time.Minute))},
		{domain: "newer", descs: [][]string{{"primary", "a"}, {"backup", "a"}},
			want: answer("OK", status("OVER_LIMIT", "1/MINUTE", 0, time.Minute), status("OK", "2/MINUTE", 0, time.Minute))},
		{domain: "newer", descs: [][]string{{"primary", "a"}, {"backup", "a"}},
			want: answer("OVER_LIMIT", status("OVER_LIMIT", "1/MINUTE", 0, time.Minute), status("OVER_LIMIT", "2/MINUTE", 0, time.Minute))},
		{domain: "newer", descs: [][]string{{"primary", "b"}}, want: answer("OK", status("OK", "1/MINUTE", 0, time.Minute))},
		{domain: "newer", descs: [][]string{{"primary", "b"}}, want: answer("OVER_LIMIT", status("OVER_LIMIT", "1/MINUTE", 0, time.Minute))},
	}},
	{name: "metadata", fgLoads: true, files: oneFile(`domain: newer
descriptors:
  - key: team
    rate_limit: {unit: minute, requests_per_unit: 4}
    metadata:
      owner: payments
      pager: {channel: oncall, escalate: true}
      tags: [billing, 3]
`), steps: []step{
		{domain: "newer", descs: [][]string{{"team", "x"}}, want: answer("OK", status("OK", "4/MINUTE", 3, time.Minute))},
	}},
	// With RESPONSE_DYNAMIC_METADATA (src/service/ratelimit.go,
	// ratelimitToMetadata): the request's domain and descriptors, and the
	// metadata of the rules not over their limit, merged.
	{name: "dynamic metadata", fgLoads: true, opts: []envoyrls.Option{envoyrls.WithDynamicMetadata(true)}, files: oneFile(`domain: newer
descriptors:
  - key: team
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata:
      owner: payments
      pager: {channel: oncall, escalate: true}
      tags: [billing, 3]
`), steps: []step{
		{domain: "newer", descs: [][]string{{"team", "x"}}, want: answer("OK", status("OK", "1/MINUTE", 0, time.Minute)) +
			` metadata={"descriptors":[{"entries":["team=x"]}],"domain":"newer",` +
			`"metadata":{"owner":"payments","pager":{"channel":"oncall","escalate":true},"tags":["billing",3]}}`},
		{domain: "newer", descs: [][]string{{"team", "x"}}, hits: 2, want: answer("OVER_LIMIT", status("OVER_LIMIT", "1/MINUTE", 0, time.Minute)) +
			` metadata={"descriptors":[{"entries":["team=x"]}],"domain":"newer","hitsAddend":2}`},
	}},
}

// newerDifferences are the fixtures of newerFeatures that floodgate does
// not pass yet, by name, with the reason.
var newerDifferences = map[string]string{}

// TestUpstreamNewerFeatures: floodgate loads and answers newerFeatures as
// upstream's main branch documents, but for newerDifferences, each of
// which must still fail.
func TestUpstreamNewerFeatures(t *testing.T) {
	srv := redistest.NewServer(t)
	for _, f := range newerFeatures {
		t.Run(f.name, func(t *testing.T) {
			var problems []string
			_, err := envoyrls.ParseConfig(f.bytes())
			if (err == nil) != f.fgLoads {
				problems = append(problems, "floodgate "+verdict(err))
			}
			if err == nil {
				clk := clock.NewFake(suiteT0)
				peers := newFloodgatePeers(t, srv, clk, f.bytes(), f.opts...)
				for i, s := range f.steps {
					clk.Advance(s.after)
					for _, p := range peers {
						if got := ask(p, s); got != s.want {
							problems = append(problems, fmt.Sprintf("step %d, %v: %s answers %s, want %s", i, s, p.name, got, s.want))
						}
					}
				}
			}
			why, listed := newerDifferences[f.name]
			switch {
			case listed && len(problems) == 0:
				t.Errorf("floodgate now does as upstream documents: remove %q from newerDifferences (%s)", f.name, why)
			case listed:
				t.Logf("a known difference (%s): %s", why, strings.Join(problems, "; "))
			default:
				for _, p := range problems {
					t.Error(p)
				}
			}
		})
	}
}

// unknownUnitDoc is the phrase of envoyrls's documentation on a limit
// override without a unit.
const unknownUnitDoc = "where upstream's service panics and its process ends"

// TestUpstreamOverrideWithoutUnit: a limit override whose unit is UNKNOWN
// (as a week is, Envoy's override having none) makes upstream's service
// panic with a value its ShouldRateLimit does not recover, which over
// gRPC ends the process; here it is called directly, to catch the panic.
// floodgate refuses the request, as its documentation says.
func TestUpstreamOverrideWithoutUnit(t *testing.T) {
	if !strings.Contains(envoyrlsDoc(t), unknownUnitDoc) {
		t.Fatalf("envoyrls's documentation no longer says %q", unknownUnitDoc)
	}
	srv := redistest.NewServer(t)
	peers := newPeers(t, srv, clock.NewFake(suiteT0), map[string][]byte{"fixture.yaml": []byte(twoPerMinute)})
	s := step{domain: "doc", descs: [][]string{{"k", "a"}}, override: map[int]string{0: "3/UNKNOWN"}}
	for _, p := range peers[:len(peers)-1] {
		if got, want := ask(p, s), "error: InvalidArgument: limit override: unit UNKNOWN is not a rate limit unit"; got != want {
			t.Errorf("%s answers %s, want %s", p.name, got, want)
		}
	}
	up := peers[len(peers)-1]
	panicked := func() (r any) {
		defer func() { r = recover() }()
		up.service.ShouldRateLimit(context.Background(), s.request())
		return nil
	}()
	if panicked == nil {
		t.Errorf("%s answered; its documentation in envoyrls says it panics", up.name)
	}
	t.Logf("%s panics: %v", up.name, panicked)
}
