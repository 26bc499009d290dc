package envoyrls

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// jsonOf writes a Struct as JSON with sorted keys, for comparisons.
func jsonOf(t *testing.T, st *structpb.Struct) string {
	t.Helper()
	if st == nil {
		return "null"
	}
	b, err := json.Marshal(st.AsMap())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseMetadata(t *testing.T) {
	c := mustParse(t, `
domain: m
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
    metadata:
      base: &base {shared: 1, over: base}
      text: hello
      quoted: "true"
      yes_no: yes
      hex: 0x10
      float: 2.5
      none: ~
      list: [a, 1, false, {x: z}]
      merged: {<<: *base, over: own}
      "1": number key
  - key: empty
    rate_limit: {unit: second, requests_per_unit: 1}
    metadata: {}
  - key: none
    rate_limit: {unit: second, requests_per_unit: 1}
`)
	want := `{"1":"number key","base":{"over":"base","shared":1},"float":2.5,"hex":16,"list":["a",1,false,{"x":"z"}],"merged":{"over":"own","shared":1},"none":null,"quoted":"true","text":"hello","yes_no":true}`
	if got := jsonOf(t, ruleFor(t, c, "m", "k", "v").metadata); got != want {
		t.Errorf("metadata:\n got  %s\n want %s", got, want)
	}
	for _, key := range []string{"empty", "none"} {
		if md := ruleFor(t, c, "m", key, "v").metadata; md != nil {
			t.Errorf("%s: metadata %v, want nil", key, md)
		}
	}
}

// The dynamic metadata of answers, as upstream's with
// RESPONSE_DYNAMIC_METADATA: the request, and the merged metadata of the
// rules that were not over their limit.
func TestDynamicMetadata(t *testing.T) {
	cfg, err := LoadConfig(filepath.Join("testdata", "dropin"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := newServiceWith(t, cfg, WithDynamicMetadata(true))
	req := parseRequest("backends backend=primary ; backend=fallback")
	const descs = `"descriptors":[{"entries":["backend=primary"]},{"entries":["backend=fallback"]}]`
	for i, want := range []string{
		// Both within their quota: the first value of a field wins,
		// and structs are merged.
		`{` + descs + `,"domain":"backends","metadata":{"route":{"cluster":"primary","weight":3},"tier":"spare"}}`,
		// primary is over: only fallback's, unchanged by the merge before.
		`{` + descs + `,"domain":"backends","metadata":{"route":{"cluster":"fallback"},"tier":"spare"}}`,
		// Both over: no metadata.
		`{` + descs + `,"domain":"backends"}`,
	} {
		resp, err := s.ShouldRateLimit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonOf(t, resp.DynamicMetadata); got != want {
			t.Errorf("request %d:\n got  %s\n want %s", i, got, want)
		}
	}

	// The request's hits_addend, a descriptor's and its limit; a domain
	// the configuration does not have.
	req = &rlsv3.RateLimitRequest{Domain: "nowhere", HitsAddend: 2, Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries:    entries("a", "b"),
		HitsAddend: wrapperspb.UInt64(3),
		Limit:      &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 5, Unit: 1},
	}}}
	resp, err := s.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	got := jsonOf(t, resp.DynamicMetadata)
	for _, part := range []string{`"domain":"nowhere"`, `"hitsAddend":2`, `"entries":["a=b"]`, `"hitsAddend":3`, `"limit":"requests_per_unit:5`} {
		if !strings.Contains(strings.ReplaceAll(got, " ", ""), strings.ReplaceAll(part, " ", "")) {
			t.Errorf("dynamic metadata %s has no %s", got, part)
		}
	}

	// Without the option, none.
	plain, _ := newServiceWith(t, cfg)
	if resp, _ := plain.ShouldRateLimit(context.Background(), parseRequest("backends backend=primary")); resp.DynamicMetadata != nil {
		t.Errorf("dynamic metadata %v without WithDynamicMetadata", resp.DynamicMetadata)
	}
}
