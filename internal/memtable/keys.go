package memtable

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"

	"github.com/floodgate/floodgate/algo"
)

// A slot holds one key of a shard in 24 bytes that hold no pointer, so
// that the garbage collector never scans a shard's slots: its state (an
// algo.Cell's t and x; a sliding-window key's y is in the shard's ys, as
// no other algorithm reads it), and its key in 12 bytes. The last of them
// says what they hold: 0 nothing (an empty slot, so that a zeroed array is
// empty), 1+n a key of n <= inlineMax bytes, held in the first n, and
// longKey a longer key, held in the shard's arena after its length (a
// uvarint): the first 8 bytes hold its offset there, the next 3 bits of
// its hash. A lookup compares the 12 bytes of each slot it probes as two
// words, and reads the arena only for a likely match, so that it reads one
// slot, its state beside its key, and no other array.
type slot struct {
	t   int64
	x   uint32
	key [12]byte
}

// inlineMax is the longest key a slot holds in itself.
const inlineMax = 11

const longKey = 0xff

// empty reports whether s holds no key.
func (s *slot) empty() bool { return s.key[11] == 0 }

// words returns s's 12 key bytes as two words.
func (s *slot) words() (uint64, uint32) {
	return binary.LittleEndian.Uint64(s.key[:8]), binary.LittleEndian.Uint32(s.key[8:])
}

// keyWords returns the words of a slot holding key, whose hash is h: all
// 12 bytes of a key held inline, and the second word only of a long key
// (the first is its offset in the arena, 0 here).
func keyWords(h uint64, key string) (uint64, uint32) {
	if len(key) > inlineMax {
		return 0, uint32(h&0xffffff) | longKey<<24
	}
	var b [12]byte
	copy(b[:], key)
	b[11] = byte(len(key)) + 1
	return binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint32(b[8:])
}

// cell returns the state of sh's slot i.
func (sh *shard) cell(i int) algo.Cell {
	var y uint32
	if sh.ys != nil {
		y = sh.ys[i]
	}
	return algo.MakeCell(sh.slots[i].t, sh.slots[i].x, y)
}

// setCell puts c in sh's slot i.
func (sh *shard) setCell(i int, c algo.Cell) {
	var y uint32
	sh.slots[i].t, sh.slots[i].x, y = c.Parts()
	if sh.ys != nil {
		sh.ys[i] = y
	}
}

// move moves the key and state of sh's slot j to slot i, and empties j.
func (sh *shard) move(i, j int) {
	sh.slots[i], sh.slots[j] = sh.slots[j], slot{}
	if sh.ys != nil {
		sh.ys[i], sh.ys[j] = sh.ys[j], 0
	}
}

// clear empties sh's slot i.
func (sh *shard) clear(i int) {
	sh.slots[i] = slot{}
	if sh.ys != nil {
		sh.ys[i] = 0
	}
}

// keyOf returns the bytes of s's key, in s or in sh's arena.
func (sh *shard) keyOf(s *slot) []byte {
	if n := s.key[11]; n != longKey {
		return s.key[: n-1 : n-1]
	}
	off, n := sh.arenaKey(s)
	return sh.arena[off : off+n : off+n]
}

// arenaKey returns the offset and length of the bytes of long key s in
// sh's arena, past its length.
func (sh *shard) arenaKey(s *slot) (int, int) {
	off := int(binary.LittleEndian.Uint64(s.key[:8]))
	n, k := binary.Uvarint(sh.arena[off:])
	return off + k, int(n)
}

// hashOf returns the hash of the key of sh's slot i.
func (t *Table) hashOf(sh *shard, i int) uint64 {
	return maphash.Bytes(t.seed, sh.keyOf(&sh.slots[i]))
}

// setKey puts key, whose hash is h, in s, and a long key's length and
// bytes at the end of sh's arena, which has room for them (see
// arenaGrowth).
func (sh *shard) setKey(s *slot, h uint64, key string) {
	w0, w1 := keyWords(h, key)
	if len(key) > inlineMax {
		if len(sh.arena)+arenaLen(len(key)) > cap(sh.arena) {
			sh.rebuildArena(sh.arenaCap(len(key)))
		}
		w0 = uint64(len(sh.arena))
		sh.arena = binary.AppendUvarint(sh.arena, uint64(len(key)))
		sh.arena = append(sh.arena, key...)
	}
	binary.LittleEndian.PutUint64(s.key[:8], w0)
	binary.LittleEndian.PutUint32(s.key[8:], w1)
}

// arenaLen is what a long key of n bytes takes in an arena: its length,
// a uvarint, and its bytes.
func arenaLen(n int) int { return max(1, (bits.Len(uint(n))+6)/7) + n }

// arenaGrowth returns the bytes by which storing a key of n bytes grows
// sh's arena, as the Budget counts them (0 for a key held inline); fewer
// than 0 when making room compacts the arena.
func (sh *shard) arenaGrowth(n int) int64 {
	if n <= inlineMax || len(sh.arena)+arenaLen(n) <= cap(sh.arena) {
		return 0
	}
	return arenaBytes(sh.arenaCap(n)) - arenaBytes(cap(sh.arena))
}

// arenaCap returns the capacity of an arena rebuilt to hold the live
// long keys of sh and one more of n bytes: a quarter more than they take.
func (sh *shard) arenaCap(n int) int {
	live := len(sh.arena) - sh.dead + arenaLen(n)
	return int(allocBytes(int64(max(live+live/4, 64))))
}

// rebuildArena copies the live long keys of sh to a new arena of capacity
// c (the caller counts it), dropping the bytes of removed ones.
func (sh *shard) rebuildArena(c int) {
	old := sh.arena
	sh.arena = make([]byte, 0, c)
	for i := range sh.slots {
		s := &sh.slots[i]
		if s.key[11] != longKey {
			continue
		}
		from := binary.LittleEndian.Uint64(s.key[:8])
		n, k := binary.Uvarint(old[from:])
		binary.LittleEndian.PutUint64(s.key[:8], uint64(len(sh.arena)))
		sh.arena = append(sh.arena, old[from:from+uint64(k)+n]...)
	}
	sh.dead = 0
}

// dropKey counts the bytes of s's key, being removed, as dead, and
// compacts the arena once more than half of it is dead; it returns the
// bytes that freed, as the Budget counts them.
func (sh *shard) dropKey(s *slot) int64 {
	if s.key[11] != longKey {
		return 0
	}
	_, n := sh.arenaKey(s)
	sh.dead += arenaLen(n)
	if sh.dead*2 <= len(sh.arena) || sh.dead < 256 {
		return 0
	}
	s.key = [12]byte{} // not live: rebuildArena skips it
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
