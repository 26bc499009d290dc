package store_test

import (
	"slices"
	"testing"

	"github.com/floodgate/floodgate/store"
)

// AnswerEach answers the ops its answer takes, except those after an op
// on the same key that goes to the store, for few ops and for many (when
// it keeps the keys sent in a map).
func TestAnswerEach(t *testing.T) {
	for _, c := range []struct {
		keys      string // one op a letter; answer takes the lower-case ones
		wantIndex []int
	}{
		{"abc", nil},
		{"AbC", []int{0, 2}},
		{"AaBbaA", []int{0, 1, 2, 3, 4, 5}},
		{"aAa", []int{1, 2}},
		{"abAbcBa", []int{2, 5, 6}},
		{"ABCDEFGHIJab", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
		{"ABCDEFGHIJkaKk", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13}},
	} {
		t.Run(c.keys, func(t *testing.T) {
			ops := make([]store.Op, len(c.keys))
			for i, k := range c.keys {
				ops[i] = store.Op{Kind: store.OpDecide, Key: string(k), N: int64(i)}
			}
			answer := func(op *store.Op) bool {
				if op.Key[0] < 'a' {
					return false
				}
				op.Result.At = 1
				return true
			}
			key := func(op *store.Op) string { return string(op.Key[0] | 0x20) } // a and A are one key
			rest, index := store.AnswerEach(ops, answer, key)
			if !slices.Equal(index, c.wantIndex) {
				t.Fatalf("index %v, want %v", index, c.wantIndex)
			}
			for j, i := range index {
				if rest[j].N != int64(i) || ops[i].Result.At != 0 {
					t.Errorf("rest[%d] is op %d, want %d, answered: %v", j, rest[j].N, i, ops[i].Result.At != 0)
				}
			}
			for i := range ops {
				if !slices.Contains(index, i) && ops[i].Result.At != 1 {
					t.Errorf("op %d neither answered nor sent", i)
				}
			}
		})
	}
}
