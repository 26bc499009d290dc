package memtable

import (
	"encoding/binary"
	"hash/maphash"

	"github.com/floodgate/floodgate/algo"
)

// A slot holds one key of a shard: its state, and its key in 16 bytes,
// which hold no pointer, so that the garbage collector never scans a
// shard's slots. The last of them says what they hold: 0 nothing (an empty
// slot, so that a zeroed array is empty), 1+n a key of n <= inlineMax bytes,
// held in the first n, and longKey a longer key, held in the shard's arena:
// the first 8 bytes hold its offset there, the next 4 its length and the
// next 3 bits of its hash. A lookup compares the 16 bytes of each slot it
// probes as two words, and reads the arena only for a likely match, so that
// it reads one slot, its state beside its key, and no other array.
type slot struct {
	c   algo.Cell
	key [16]byte
}

// inlineMax is the longest key a slot holds in itself.
const inlineMax = 15

const longKey = 0xff

// empty reports whether s holds no key.
func (s *slot) empty() bool { return s.key[15] == 0 }

// words returns s's 16 key bytes as two words.
func (s *slot) words() (uint64, uint64) {
	return binary.LittleEndian.Uint64(s.key[:8]), binary.LittleEndian.Uint64(s.key[8:])
}

// keyWords returns the words of a slot holding key, whose hash is h: all
// 16 bytes of a key held inline, and the second word only of a long key
// (the first is its offset in the arena, 0 here).
func keyWords(h uint64, key string) (uint64, uint64) {
	if len(key) > inlineMax {
		return 0, uint64(uint32(len(key))) | (h&0xffffff)<<32 | longKey<<56
	}
	var b [16]byte
	copy(b[:], key)
	b[15] = byte(len(key)) + 1
	return binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])
}

// keyOf returns the bytes of s's key, in s or in sh's arena.
func (sh *shard) keyOf(s *slot) []byte {
	if n := s.key[15]; n != longKey {
		return s.key[: n-1 : n-1]
	}
	off := binary.LittleEndian.Uint64(s.key[:8])
	n := uint64(binary.LittleEndian.Uint32(s.key[8:12]))
	return sh.arena[off : off+n : off+n]
}

// hashOf returns the hash of the key of sh's slot i.
func (t *Table) hashOf(sh *shard, i int) uint64 {
	return maphash.Bytes(t.seed, sh.keyOf(&sh.slots[i]))
}

// setKey puts key, whose hash is h, in s, and a long key's bytes at the
// end of sh's arena, which has room for them (see arenaGrowth).
func (sh *shard) setKey(s *slot, h uint64, key string) {
	w0, w1 := keyWords(h, key)
	if len(key) > inlineMax {
		if len(sh.arena)+len(key) > cap(sh.arena) {
			sh.rebuildArena(sh.arenaCap(len(key)))
		}
		w0 = uint64(len(sh.arena))
		sh.arena = append(sh.arena, key...)
	}
	binary.LittleEndian.PutUint64(s.key[:8], w0)
	binary.LittleEndian.PutUint64(s.key[8:], w1)
}

// arenaGrowth returns the bytes by which storing a key of n bytes grows
// sh's arena, as the Budget counts them (0 for a key held inline); fewer
// than 0 when making room compacts the arena.
func (sh *shard) arenaGrowth(n int) int64 {
	if n <= inlineMax || len(sh.arena)+n <= cap(sh.arena) {
		return 0
	}
	return arenaBytes(sh.arenaCap(n)) - arenaBytes(cap(sh.arena))
}

// arenaCap returns the capacity of an arena rebuilt to hold the live
// long keys of sh and one more of n bytes: a quarter more than they take.
func (sh *shard) arenaCap(n int) int {
	live := len(sh.arena) - sh.dead + n
	return int(allocBytes(int64(max(live+live/4, 64))))
}

// rebuildArena copies the live long keys of sh to a new arena of capacity
// c (the caller counts it), dropping the bytes of removed ones.
func (sh *shard) rebuildArena(c int) {
	old := sh.arena
	sh.arena = make([]byte, 0, c)
	for i := range sh.slots {
		s := &sh.slots[i]
		if s.key[15] != longKey {
			continue
		}
		off := binary.LittleEndian.Uint64(s.key[:8])
		n := uint64(binary.LittleEndian.Uint32(s.key[8:12]))
		binary.LittleEndian.PutUint64(s.key[:8], uint64(len(sh.arena)))
		sh.arena = append(sh.arena, old[off:off+n]...)
	}
	sh.dead = 0
}

// dropKey counts the bytes of s's key, being removed, as dead, and
// compacts the arena once more than half of it is dead; it returns the
// bytes that freed, as the Budget counts them.
func (sh *shard) dropKey(s *slot) int64 {
	if s.key[15] != longKey {
		return 0
	}
	sh.dead += int(binary.LittleEndian.Uint32(s.key[8:12]))
	if sh.dead*2 <= len(sh.arena) || sh.dead < 256 {
		return 0
	}
	s.key = [16]byte{} // not live: rebuildArena skips it
	before := arenaBytes(cap(sh.arena))
	if sh.dead == len(sh.arena) {
		sh.arena, sh.dead = nil, 0
		return before
	}
	sh.rebuildArena(int(allocBytes(int64(len(sh.arena) - sh.dead))))
	return before - arenaBytes(cap(sh.arena))
}

// arenaBytes is what an arena of capacity c costs.
func arenaBytes(c int) int64 { return allocBytes(int64(c)) }
