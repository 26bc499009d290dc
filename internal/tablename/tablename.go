// Package tablename names a limiter's table in a shared store (Redis, a
// file), so that every process using the store finds the same keys: the
// limiter's name, then "@" and its policy when the name is not the
// policy's own string (a limiter's default name). In both, '%', ':', '{',
// '}' and '@' are escaped as in URLs, so that the first '@' ends the name
// and neither holds a Redis hash tag or a key separator.
package tablename

import (
	"strings"

	"github.com/floodgate/floodgate/algo"
)

var (
	escaper   = strings.NewReplacer("%", "%25", ":", "%3A", "{", "%7B", "}", "%7D", "@", "%40")
	unescaper = strings.NewReplacer("%25", "%", "%3A", ":", "%7B", "{", "%7D", "}", "%40", "@")
)

// Of returns the name of the table of the limiter named name with policy p.
func Of(name string, p algo.Policy) string {
	s := Escape(name)
	if name != p.String() {
		s += "@" + escaper.Replace(p.String())
	}
	return s
}

// PolicyOf returns the policy of the table named s, or false when no
// limiter's table has that name.
func PolicyOf(s string) (algo.Policy, bool) {
	text := s
	if i := strings.IndexByte(s, '@'); i >= 0 {
		text = s[i+1:]
	}
	p, err := algo.ParsePolicy(unescaper.Replace(text))
	if err != nil || escaper.Replace(p.String()) != text {
		return algo.Policy{}, false
	}
	return p, true
}

// Escape returns name with the characters that Of escapes escaped: a name
// with no ':', '{', '}' or '@' of its own.
func Escape(name string) string { return escaper.Replace(name) }
