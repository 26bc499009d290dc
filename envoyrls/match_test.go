package envoyrls

import (
	"slices"
	"strings"
	"testing"
)

const matching = `
domain: m
descriptors:
  # key only, and a more specific value
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10, name: any-address}
  - key: remote_address
    value: 192.0.2.66
    rate_limit: {unit: second, requests_per_unit: 0, name: banned}

  # wildcards: the first in file order wins; the exact value beats both
  - key: path
    value: /api/v2/*
    rate_limit: {unit: second, requests_per_unit: 2, name: v2}
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 3, name: api}
  - key: path
    value: /api/health
    rate_limit: {unit: second, requests_per_unit: 4, name: health}
  - key: path
    rate_limit: {unit: second, requests_per_unit: 5, name: any-path}
  - key: path
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 6, name: star}

  # nesting: a rule at each depth
  - key: tenant
    value: acme
    rate_limit: {unit: minute, requests_per_unit: 100, name: acme}
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 10, name: acme-user}
        descriptors:
          - key: method
            value: POST
            rate_limit: {unit: minute, requests_per_unit: 1, name: acme-user-post}
      - key: route
        value: /files/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 7, name: acme-files}
      - key: route
        value: /docs/*
        rate_limit: {unit: minute, requests_per_unit: 8, name: acme-docs}
  - key: tenant
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 20, name: other-user}

  # a wildcard with children
  - key: host
    value: "api.*"
    share_threshold: true
    descriptors:
      - key: path
        value: /x*
        share_threshold: true
        rate_limit: {unit: hour, requests_per_unit: 9, name: hosts-x}

  # placeholders only
  - key: placeholder
    descriptors:
      - key: leaf
`

func TestLookup(t *testing.T) {
	c := mustParse(t, matching)
	for _, tc := range []struct {
		name    string
		entries []string
		rule    string // the rule's name; "" for none
		shared  []string
	}{
		{"key only", []string{"remote_address", "10.0.0.1"}, "any-address", nil},
		{"value beats key only", []string{"remote_address", "192.0.2.66"}, "banned", nil},
		{"empty value: key only", []string{"remote_address", ""}, "any-address", nil},
		{"first wildcard in file order", []string{"path", "/api/v2/users"}, "v2", nil},
		{"the other wildcard", []string{"path", "/api/v1/users"}, "api", nil},
		{"wildcard's bare prefix", []string{"path", "/api/"}, "api", nil},
		{"exact beats wildcards", []string{"path", "/api/health"}, "health", nil},
		{"catch-all wildcard beats key only", []string{"path", "/other"}, "star", nil},
		{"catch-all wildcard matches the empty value", []string{"path", ""}, "star", nil},
		{"a wildcard's literal value", []string{"path", "/api/*"}, "api", nil},
		{"prefix is case-sensitive", []string{"path", "/API/v2/x"}, "star", nil},
		{"first level of a nest", []string{"tenant", "acme"}, "acme", nil},
		{"second level", []string{"tenant", "acme", "user", "u1"}, "acme-user", nil},
		{"third level", []string{"tenant", "acme", "user", "u1", "method", "POST"}, "acme-user-post", nil},
		{"third level, other value", []string{"tenant", "acme", "user", "u1", "method", "GET"}, "", nil},
		{"deeper than the config", []string{"tenant", "acme", "user", "u1", "method", "POST", "x", "y"}, "", nil},
		{"deeper than a leaf", []string{"remote_address", "10.0.0.1", "x", "y"}, "", nil},
		{"other tenant, key-only level", []string{"tenant", "other", "user", "u1"}, "other-user", nil},
		{"other tenant has no rule at depth 1", []string{"tenant", "other"}, "", nil},
		{"entries out of order", []string{"user", "u1", "tenant", "acme"}, "", nil},
		{"shared wildcard", []string{"tenant", "acme", "route", "/files/a.pdf"}, "acme-files", []string{"", "/files/*"}},
		{"unshared wildcard", []string{"tenant", "acme", "route", "/docs/a"}, "acme-docs", nil},
		{"nested shared wildcards", []string{"host", "api.example.com", "path", "/x1"}, "hosts-x", []string{"api.*", "/x*"}},
		{"wildcard with children, no rule itself", []string{"host", "api.example.com"}, "", nil},
		{"wildcard prefix not matched", []string{"host", "www.example.com", "path", "/x1"}, "", nil},
		{"placeholders", []string{"placeholder", "p", "leaf", "l"}, "", nil},
		{"unknown key", []string{"nope", "x"}, "", nil},
		{"no entries", nil, "", nil},
		{"upstream's '_' join does not match across keys", []string{"remote", "address_10.0.0.1"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, shared := c.domains["m"].lookup(entries(tc.entries...))
			name := ""
			if r != nil {
				name = r.name
			}
			if name != tc.rule || !slices.Equal(shared, tc.shared) {
				t.Errorf("lookup(%v) = rule %q, shared %q; want %q, %q", tc.entries, name, shared, tc.rule, tc.shared)
			}
		})
	}
}

func TestStoreKey(t *testing.T) {
	for _, tc := range []struct {
		entries []string
		shared  []string
		want    string
	}{
		{[]string{"remote_address", "10.0.0.1"}, nil, "remote_address=10.0.0.1"},
		{[]string{"tenant", "acme", "user", "u1"}, nil, "tenant=acme&user=u1"},
		{[]string{"path", "/a b&c=d"}, nil, "path=%2Fa+b%26c%3Dd"},
		{[]string{"k", ""}, nil, "k="},
		{[]string{"route", "/files/a"}, []string{"/files/*"}, "route=%2Ffiles%2F%2A"},
		{[]string{"t", "acme", "route", "/files/a"}, []string{"", "/files/*"}, "t=acme&route=%2Ffiles%2F%2A"},
	} {
		if got := storeKey(entries(tc.entries...), tc.shared); got != tc.want {
			t.Errorf("storeKey(%q, %q) = %q, want %q", tc.entries, tc.shared, got, tc.want)
		}
	}
	// Different entries never share a key, however their parts are cut.
	keys := map[string][]string{}
	for _, es := range [][]string{
		{"a", "b&c=d"}, {"a", "b", "c", "d"}, {"a=b", "c"}, {"a", "b=c"}, {"a_b", "c"}, {"a", "b_c"},
	} {
		k := storeKey(entries(es...), nil)
		if prev, dup := keys[k]; dup {
			t.Errorf("%q and %q share the key %q", prev, es, k)
		}
		keys[k] = es
	}
	// A long key is replaced by its hash, the same for the same entries.
	long := strings.Repeat("x", maxKeyLen)
	k1, k2 := storeKey(entries("k", long), nil), storeKey(entries("k", long+"y"), nil)
	if !strings.HasPrefix(k1, "sha256:") || len(k1) != len("sha256:")+64 || k1 == k2 || k1 != storeKey(entries("k", long), nil) {
		t.Errorf("long keys: %q, %q", k1, k2)
	}
	if k := storeKey(entries("k", strings.Repeat("x", maxKeyLen-2)), nil); strings.HasPrefix(k, "sha256:") {
		t.Errorf("a key of %d bytes was hashed", len(k))
	}
}

func TestPatternMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"/api/*", "/api/", true},
		{"/api/*", "/api/v1/x", true},
		{"/api/*", "/ap", false},
		{"*", "", true},
		{"*.png", "a.png", true},
		{"*.png", "a.png.bak", false},
		{"/api/*/action", "/api/1/action", true},
		{"/api/*/action", "/api//action", true},
		{"/api/*/action", "/api/1/other", false},
		{"/api/*/action", "/api/action", false}, // prefix and suffix may not overlap
		{"ab*ba", "aba", false},
		{"ab*ba", "abba", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "a-c-b", false}, // in order
		{"a*b*c", "acbc", true},
		{"a**b", "ab", true},
		{"*a*a*", "xaya", true},
		{"*a*a*", "xay", false},
	} {
		p := newPattern("k", tc.pattern)
		if got := p.match(tc.s); got != tc.want {
			t.Errorf("%q matches %q: %v, want %v", tc.pattern, tc.s, got, tc.want)
		}
	}
}
