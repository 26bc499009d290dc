package envoyrls

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
)

// lookup finds the rule for a request descriptor's entries, as upstream
// does: level by level, each entry matches the descriptor with its key and
// value, else the first wildcard (in file order) that matches it (see
// node.matches), else the descriptor with its key and no value.
// The rule is that of the descriptor the last entry matches: a request
// with more or fewer entries than the configuration's depth matches
// nothing (upstream's Example 4). A nil rule means no limit.
//
// shared[i] is set, for the entries matched through a wildcard with
// share_threshold, to the wildcard's value: the limit's key uses it in
// place of the entry's value, so that all the values share one limit.
func (d *domain) lookup(entries []*ratelimitv3.RateLimitDescriptor_Entry) (r *rule, shared []string) {
	l := &d.root
	for i, e := range entries {
		key, value := e.GetKey(), e.GetValue()
		n := l.exact[entryKey{key, value}]
		if n == nil {
			if n = l.wildcard(key, value); n != nil && n.share {
				if shared == nil {
					shared = make([]string, len(entries))
				}
				shared[i] = n.sharedValue(key)
			}
		}
		if n == nil {
			n = l.keyOnly[key]
		}
		switch {
		case n == nil:
			return nil, nil
		case i == len(entries)-1 && n.rule == nil:
			return nil, nil
		case i == len(entries)-1:
			return n.rule, shared
		}
		l = &n.children
	}
	return nil, nil
}

// wildcard returns the level's first wildcard, in file order, that
// matches the entry key=value, or nil.
func (l *level) wildcard(key, value string) *node {
	for _, w := range l.wildcards {
		if w.matches(key, value) {
			return w
		}
	}
	return nil
}

// A pattern is a wildcard descriptor's key or value split at each '*',
// where each '*' stands for any run of characters, the empty one too:
// "/api/*/action" is {"/api/", "/action"}. It is nil for a descriptor
// with no '*'. When the '*' is in the key, the pattern is that of the
// key and value joined by '_' (the key alone without a value) and is
// matched against the entry's key and value so joined, as upstream
// matches every wildcard; a '*' in the value alone matches within the
// value, for the descriptor's key only.
type pattern struct {
	parts  []string
	joined bool // the '*' is in the key: match key_value
}

// newPattern returns the pattern of a descriptor's key and value, nil
// when neither has a '*'.
func newPattern(key, value string) *pattern {
	switch {
	case strings.Contains(key, "*"):
		return &pattern{parts: strings.Split(composite(key, value), "*"), joined: true}
	case strings.Contains(value, "*"):
		return &pattern{parts: strings.Split(value, "*")}
	}
	return nil
}

// composite is upstream's name for a descriptor or an entry: its key,
// and '_' and its value when it has one.
func composite(key, value string) string {
	if value == "" {
		return key
	}
	return key + "_" + value
}

// matches reports whether the entry key=value matches the wildcard n.
func (n *node) matches(key, value string) bool {
	if n.pat.joined {
		// Upstream joins the entry's key and value even when the
		// value is empty.
		return n.pat.match(key + "_" + value)
	}
	return key == n.key && n.pat.match(value)
}

// match reports whether s matches the pattern: it begins with the first
// part, ends with the last, and has the others in order between them.
func (p *pattern) match(s string) bool {
	first, last := p.parts[0], p.parts[len(p.parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, part := range p.parts[1 : len(p.parts)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return true
}

// sharedValue is the value that stands, in the store key, for every
// value of key that the shared wildcard n matches: its own value, or for
// a '*' in the key, its pattern, as upstream's counter key has it.
func (n *node) sharedValue(key string) string {
	if !n.pat.joined {
		return n.value // matches took key == n.key
	}
	return strings.TrimPrefix(composite(n.key, n.value), key+"_")
}

// maxKeyLen is the longest store key written as is; a longer one (a
// descriptor with long values) is replaced by its SHA-256, so that every
// store can hold it and a request cannot make the service keep megabytes
// per key.
const maxKeyLen = 512

// storeKey is the key of a descriptor's limit in its domain's table: the
// entries as key=value pairs joined by '&', query-escaped so that
// different entries never give the same key; with the values of shared
// entries replaced by their wildcard.
func storeKey(entries []*ratelimitv3.RateLimitDescriptor_Entry, shared []string) string {
	var b strings.Builder
	size := 0
	for _, e := range entries {
		size += len(e.GetKey()) + len(e.GetValue()) + 2
	}
	b.Grow(size) // enough unless a value has escapes or is shared
	for i, e := range entries {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(e.GetKey()))
		b.WriteByte('=')
		v := e.GetValue()
		if shared != nil && shared[i] != "" {
			v = shared[i]
		}
		b.WriteString(url.QueryEscape(v))
	}
	if b.Len() <= maxKeyLen {
		return b.String()
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "sha256:" + hex.EncodeToString(sum[:])
}
