package memtable

import "github.com/floodgate/floodgate/algo"

// A shard's shadow holds, in a table of algo.Shadow values, the states of
// the keys it evicted before they drained, so that a key it does not hold
// starts from a state at least as strict as the one it was evicted with.
// Each key has shadowWays slots in it, picked by its hash (shadowWays):
// it is forgotten into all of them and recalled from the loosest, as a
// count-min sketch counts into every row and reads the least. A new key is
// then denied for others' states only when all of its slots are strict.
//
// Invariants:
//
//  1. Every slot is at least as strict as every state forgotten into it
//     since it last drained (algo.Policy.Forget).
//  2. A key of hash h is forgotten into all of its shadowWays slots, which
//     are distinct and depend only on h and the shadow's size (forget).
//  3. A shadow's size never changes until its shard is freed, so a key's
//     slots stay its slots (forget allocates it once).
//  4. recall starts a missing key from one of its slots (the loosest), so,
//     by 1 to 3, from a state at least as strict as each it was evicted
//     with since that slot drained: eviction never admits more.
//  5. A shard's shadow of minShadowSlots is counted in the Budget when New
//     makes its Table; a larger one is counted when allocated, and also in
//     the Budget's share for shadows, which all of its Tables' shadows
//     together never exceed (Budget.takeShadow); fold gives both back.

// shadowWays is the number of slots of a shadow a key is forgotten into.
const shadowWays = 4

// minShadowSlots is the size of a shard's smallest shadow, counted by New;
// maxShadowSlots bounds a Table's shadows, all shards together. Both are
// powers of two.
const minShadowSlots, maxShadowSlots = 16, 1 << 20

// shadowShare and tableShadowShare are the parts of a Budget, as
// fractions 1/n, that shadows beyond their smallest size may take: all
// Tables' together, and one Table's.
const shadowShare, tableShadowShare = 16, 64

// shadowSize returns the size of each shadow of a Table of n shards
// bounded to maxKeys keys in b: a power of two, at least minShadowSlots,
// such that its shadows together hold at most a slot per key, at
// most maxShadowSlots, and take at most 1/tableShadowShare of b.
func shadowSize(b *Budget, maxKeys, n int) int {
	most := min(b.max/tableShadowShare/shadowSlotBytes, int64(maxKeys), maxShadowSlots) / int64(n)
	size := minShadowSlots
	for int64(size)*2 <= most {
		size *= 2
	}
	return size
}

// shadowSlots returns the indexes of the shadowWays slots of a key of hash
// h in sh's shadow: a+i*b for i below shadowWays, modulo its size, with b
// odd, so distinct.
func (sh *shard) shadowSlots(h uint64) [shadowWays]int {
	mask := uint64(len(sh.shadow) - 1)
	a, b := h, h>>32|1
	var idx [shadowWays]int
	for i := range idx {
		idx[i] = int((a + uint64(i)*b) & mask)
	}
	return idx
}

// forget adds the state of a key of hash h, dropped at now before it
// drained, to each of its slots in sh's shadow (invariant 2). It
// allocates the shadow on the shard's first eviction, at the Table's size
// or the largest half of it that the Budget gives (invariants 3, 5).
func (t *Table) forget(sh *shard, h uint64, s *algo.State, now int64) {
	if sh.shadow == nil {
		n := t.shadowN
		for n > minShadowSlots && !t.b.takeShadow(shadowExtra(n)) {
			n /= 2
		}
		sh.shadow = make([]algo.Shadow, n)
	}
	for _, i := range sh.shadowSlots(h) {
		t.p.Forget(&sh.shadow[i], s, now)
	}
	sh.evictions++
}

// recall returns the state at now of a key of hash h missing from sh: the
// loosest of its slots (invariant 4), joined with the Table's floor.
func (t *Table) recall(sh *shard, h uint64, now int64) algo.State {
	if sh.shadow == nil && !t.floored {
		return algo.State{}
	}
	var v algo.Shadow
	if sh.shadow != nil {
		idx := sh.shadowSlots(h)
		v = sh.shadow[idx[0]]
		for _, i := range idx[1:] {
			if t.p.Looser(sh.shadow[i], v, now) {
				v = sh.shadow[i]
			}
		}
	}
	if t.floored {
		s := t.p.Recall(v, now)
		v = algo.Shadow{}
		t.p.Forget(&v, &t.floor, now)
		t.p.Forget(&v, &s, now)
	}
	return t.p.Recall(v, now)
}
