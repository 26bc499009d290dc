package envoyrls

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/clock"
)

// FuzzParseConfig: any file is parsed or refused with a *ConfigError,
// never a panic, and a parsed one answers requests.
func FuzzParseConfig(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "upstream", "*.y*ml"))
	dropin, _ := filepath.Glob(filepath.Join("testdata", "dropin", "*", "*.y*ml"))
	more, _ := filepath.Glob(filepath.Join("testdata", "dropin", "*.y*ml"))
	paths = append(append(paths, dropin...), more...)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{everyFeature, matching, basics, configA, laughs(), "", "domain: x\n", "domain: [\n", "- a\n", "domain: a\ndescriptors:\n  - key: k\n    <<: {value: v}\n",
		"domain: w\ndescriptors:\n  - key: k\n    value: a*b**c*\n    share_threshold: true\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
		"domain: w\ndescriptors:\n  - key: k*\n    value: '*'\n    rate_limit: {unit: second, requests_per_unit: 0}\n",
		"domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967295}\n  - key: j\n    rate_limit: {unit: second, requests_per_unit: 1250000000, algorithm: token-bucket, burst: 1000000000000000}\n",
		"domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n",
		"domain: q\ndescriptors:\n  - key: k\n    quota_mode: on\n    rate_limit: {unit: hour, requests_per_unit: 2}\n    metadata: &m {a: [1, 0x2, .inf, ~, {b: yes}]}\n  - key: j\n    metadata: {<<: *m, c: \"d\"}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(map[string][]byte{"fuzz.yaml": data})
		if err != nil {
			if _, ok := errors.AsType[*ConfigError](err); !ok || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v (%T) is not a *ConfigError", err, err)
			}
			return
		}
		domains := c.Domains()
		if len(domains) != 1 || domains[0] == "" {
			t.Fatalf("a parsed file has domains %q", domains)
		}
		s := NewService(c, memstore.New(0), WithClock(clock.NewFake(t0)), WithDynamicMetadata(true), WithQuotaMode(len(data)%2 == 0))
		for _, r := range c.rules {
			if r.domain != domains[0] || (r.policy.IsZero() && r.perUnit != 0 && !r.unlimited) {
				t.Fatalf("rule %+v", r)
			}
		}
		// A request of one or two entries taken from the file.
		words := strings.Fields(string(data))
		kv := []string{"k", "v"}
		if len(words) >= 4 {
			kv = words[:4]
		}
		resp, err := s.ShouldRateLimit(context.Background(), request(domains[0], descriptor(kv...), descriptor(kv[:2]...)))
		if err != nil {
			t.Fatalf("ShouldRateLimit: %v", err)
		}
		if _, err := proto.Marshal(resp); err != nil { // what gRPC sends
			t.Fatalf("the answer does not marshal: %v", err)
		}
	})
}

// FuzzJSONHandler: any body gets one of the documented answers, with a
// JSON body, never a panic.
func FuzzJSONHandler(f *testing.F) {
	for _, s := range []string{
		`{"domain": "demo", "descriptors": [{"entries": [{"key": "one_per_minute", "value": "x"}]}]}`,
		`{"domain": "demo", "hitsAddend": 4294967295, "descriptors": [{"entries": [{"key": "two_per_minute"}], "hitsAddend": "18446744073709551615"}]}`,
		`{"domain": "demo", "descriptors": [{"entries": [{"key": "k"}], "limit": {"requestsPerUnit": 3, "unit": "HOUR", "unitMultiplier": 400}}]}`,
		`{"domain": "demo", "descriptors": [{"entries": [{"key": "k"}], "limit": {"requests_per_unit": 0, "unit": 99}}]}`,
		`{"domain": "demo", "descriptors": [{"isNegativeHits": true}]}`,
		`{"domain": "nowhere", "descriptors": [{}]}`,
		`{"domain": "demo", "descriptors": [null]}`,
		`{}`, `[]`, `null`, ``, `{"domain": "demo"`, "\xff",
	} {
		f.Add([]byte(s))
	}
	cfg := mustParse(f, `
domain: demo
descriptors:
  - key: one_per_minute
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: two_per_minute
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: token-bucket, burst: 2}
  - key: k
    value: "*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 0}
`)
	s := NewService(cfg, memstore.New(0), WithClock(clock.NewFake(t0)))
	h := s.JSONHandler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json", strings.NewReader(string(body))))
		switch rec.Code {
		case http.StatusOK, http.StatusTooManyRequests, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("the answer to %q is not JSON: %s", body, rec.Body)
		}
	})
}
