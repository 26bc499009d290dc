package store

// AnswerEach splits ops, an ApplyEach's, for a store that answers some
// ops itself (a deny cache): it sets the Result of each op that answer
// answers (answer reports whether it did), unless an earlier op of ops on
// the same key, as key names it, goes to the store, whose effect the op
// must see; and it returns the others, in their order, with their indices
// in ops (rest[j] is ops[index[j]]).
func AnswerEach[K comparable](ops []Op, answer func(*Op) bool, key func(*Op) K) (rest []Op, index []int) {
	var sent map[K]bool // the keys of rest, once it is more than a few
	for i := range ops {
		op := &ops[i]
		if !sentBefore(rest, sent, op, key) && answer(op) {
			continue
		}
		rest, index = append(rest, *op), append(index, i)
		switch {
		case sent != nil:
			sent[key(op)] = true
		case len(rest) > 8:
			sent = make(map[K]bool, 2*len(rest))
			for j := range rest {
				sent[key(&rest[j])] = true
			}
		}
	}
	return rest, index
}

// sentBefore reports whether an op of rest (whose keys sent holds, once
// they are many) is on op's key.
func sentBefore[K comparable](rest []Op, sent map[K]bool, op *Op, key func(*Op) K) bool {
	if sent != nil {
		return sent[key(op)]
	}
	k := key(op)
	for j := range rest {
		if key(&rest[j]) == k {
			return true
		}
	}
	return false
}
