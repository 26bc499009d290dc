package filestore

import (
	"bytes"

	"github.com/floodgate/floodgate/algo"
)

// formerState returns key's state in the tables of t's limiter name under
// other policies, converted to t's policy at now (algo.Policy.Convert):
// that of the table whose converted state drains last, or the zero State
// when none holds the key. Their buckets are those named like t's up to
// and with the "@" that begins the policy (see Store.Table); a table of
// the default name (a policy's own string) has none. A value that does
// not decode is passed over: it is its own table's to report.
func (x *txn) formerState(t *table, key string, now int64) algo.State {
	at := bytes.IndexByte(t.bucket, '@')
	if at < 0 {
		return algo.State{}
	}
	prefix := t.bucket[:at+1]
	var best algo.State
	c := x.tx.Cursor()
	for name, _ := c.Seek(prefix); name != nil && bytes.HasPrefix(name, prefix); name, _ = c.Next() {
		p := x.store.policyOf(name)
		if p == nil || bytes.Equal(name, t.bucket) {
			continue
		}
		v := x.tx.Bucket(name).Get(storedKey(key))
		var old algo.State
		if v == nil || old.UnmarshalBinary(v) != nil {
			continue
		}
		if s, err := t.policy.Convert(p, &old, now); err == nil && t.policy.ResetAt(&s) > t.policy.ResetAt(&best) {
			best = s
		}
	}
	return best
}
