package memtable

import (
	"sync/atomic"

	"github.com/floodgate/floodgate/algo"
)

// The lock-free path. A token-bucket or leaky-bucket Table whose policy
// DecideTAT decides (Table.fast) decides most events on a held key with
// a compare-and-swap on the key's slot word, without the shard's lock.
// Everything else takes the lock. The paths under the lock keep these
// invariants, which decideFast relies on; the code that keeps one cites
// it as "fast.go invariant N", and TestFastInvariantN checks item N:
//
//  1. Only what DecideTAT decides. decideFast runs only in a fast Table,
//     only on a key of at most inlineMax bytes held in its slot, and only
//     for an event DecideTAT decides (a cost from 1 to the burst). Any
//     other key or event goes to the lock, having changed nothing.
//  2. A held word is not changed without the lock. A locked path that
//     reads a slot's state to change, move or remove it first sets the
//     word's held bit (shard.hold, dropDrained's compare-and-swap,
//     resize's swap, Table.hold before a Table is freed). decideFast
//     returns to the lock on a held word, so its compare-and-swap succeeds
//     only on a state no locked path is working on.
//  3. A clear held bit means the word is the whole state. setCell sets the
//     bit when the state's x (a fraction) is not 0, and Table.hold(false)
//     keeps it then, so a decision without the lock never drops a fraction.
//  4. A slot names one key for its array's life. A removed key leaves a
//     tombstone (k1 = deadWord), never an empty slot, and find never puts
//     another key there; only resize builds a new array. So the slot that
//     decideFast matched holds that key until its word is held.
//  5. A key is published word by word, k1 last. setKey stores k0, then
//     k1; a lookup without the lock reads k1, then k0. An empty k1 ends the
//     probe (the key goes to the lock), and a matching k1 means k0 is
//     complete.
//  6. A replaced array is held throughout. resize swaps every live word
//     of the old array to held as it copies it, and only then publishes
//     the new one (shard.tab), so a compare-and-swap on the old array
//     after its word moved fails. A freed shard publishes nil.
//  7. A denial writes nothing. DecideTAT leaves a denied TAT as it was,
//     and only an admission swaps the word, so the word after a denial is
//     the word before and denials of one key never contend.
//  8. A decision without the lock leaves the shard's last alone. Close,
//     Fold and Shed take last as now; an older now only makes them
//     stricter (fewer keys count as drained).

// decideFast decides, without the shard's lock, an event that DecideTAT
// decides on a key held inline in sh (invariants 1 and 3): it finds the
// key's slot in the array sh published last (6), and changes the word
// with a compare-and-swap while its held bit is clear (2); a denial
// changes nothing (7). It reports false, having changed nothing, for an
// event, a key or a slot that needs the lock.
func (t *Table) decideFast(sh *shard, h uint64, key string, now, n int64) (algo.Decision, bool) {
	tab := sh.tab.Load()
	if tab == nil || len(key) > inlineMax {
		return algo.Decision{}, false
	}
	slots := *tab
	w0, w1 := keyWords(h, key)
	for i := home(sh.local(h), len(slots)); ; i = next(i, len(slots)) {
		s := &slots[i]
		k1 := atomic.LoadUint32(&s.k1)
		if k1 == 0 {
			return algo.Decision{}, false
		}
		if k1 != w1 || atomic.LoadUint64(&s.k0) != w0 {
			continue
		}
		for {
			w := atomic.LoadInt64(&s.word)
			if w < 0 {
				return algo.Decision{}, false
			}
			d, tat, ok := t.p.DecideTAT(w, now, n)
			if !ok {
				return algo.Decision{}, false
			}
			if !d.Allowed || atomic.CompareAndSwapInt64(&s.word, w, tat) {
				return d, true
			}
		}
	}
}
