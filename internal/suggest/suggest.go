// Package suggest finds, among known names, the one a mistyped name most
// likely meant: the "did you mean" of an error about an unknown flag,
// configuration field or environment variable.
//
// Names are compared by edit distance (Levenshtein: one letter inserted,
// deleted or replaced is one edit), ignoring case. A name more than two
// edits from every known one has no suggestion.
package suggest

import (
	"math"
	"strings"
)

// maxEdits is the most edits a suggestion may be from the name given.
const maxEdits = 2

// maxLen bounds the names compared, so that a long input costs little.
const maxLen = 64

// Closest returns the name of known closest to name, within two edits
// ignoring case, or "" when none is. Of names equally close, the first in
// known wins.
func Closest(name string, known []string) string {
	best, bestDist := "", maxEdits+1
	for _, k := range known {
		if d := Distance(strings.ToLower(name), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// Distance returns the edit distance between a and b, in bytes: the
// fewest insertions, deletions and replacements that turn a into b. It
// is math.MaxInt when either is longer than 64 bytes.
func Distance(a, b string) int {
	if len(a) > maxLen || len(b) > maxLen {
		return math.MaxInt
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
