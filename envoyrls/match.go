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
// value, else the first wildcard (in file order) with its key whose value
// prefixes the entry's, else the descriptor with its key and no value.
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
			for _, w := range l.wildcards {
				if w.key == key && strings.HasPrefix(value, w.prefix) {
					n = w
					if w.share {
						if shared == nil {
							shared = make([]string, len(entries))
						}
						shared[i] = w.value
					}
					break
				}
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
