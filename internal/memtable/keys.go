package memtable

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"sync/atomic"

	"github.com/floodgate/floodgate/algo"
)

// A slot holds one key of a shard in 24 bytes that hold no pointer, so
// that the garbage collector never scans a shard's slots: its state (an
// algo.Cell's t, in word, and x; a sliding-window key's y is in the
// shard's ys, as no other algorithm reads it), and its key in 12 bytes,
// the words k0 and k1 (little-endian: byte i of the key is bits 8i of k0
// for i < 8, bits 8(i-8) of k1 after). k1's top byte, the last, says
// what they hold: 0 nothing (an empty slot, so that a zeroed array is
// empty), 1+n a key of n <= inlineMax bytes, held in the first n, longKey
// a longer key, held in the shard's arena after its length (a uvarint),
// with its offset there in k0 and 3 bytes of its hash in k1, and dead a
// removed key (a tombstone: a slot never holds another key until its
// array is rebuilt). A lookup compares k1, then k0, of each slot it
// probes, and reads the arena only for a likely match, so that it reads
// one slot, its state beside its key, and no other array.
//
// word is t, with the bit held set when x is not 0 or while a path under
// the lock holds the state (Load until Store, an eviction, a removal, a
// resize, a Table being freed): with held clear, x is 0, and Decide may
// decide on the slot without the shard's lock, with a compare-and-swap on
// word, for a policy whose events DecideTAT decides (see fast.go's
// invariants 2 and 3). So
// word is read and written atomically in such a table, and so are the key
// words of a slot that a lookup without the lock may read.
type slot struct {
	word int64
	k0   uint64
	k1   uint32
	x    uint32
}

// inlineMax is the longest key a slot holds in itself.
const inlineMax = 11

// What the last byte of a slot's key says it holds, past 1+inlineMax.
const (
	dead    = 0xfe
	longKey = 0xff
)

// held is word's bit that keeps decideFast away.
const held = -1 << 63

// marker returns the last byte of a slot's key, whose second word is k1.
func marker(k1 uint32) byte { return byte(k1 >> 24) }

// deadWord is k1 of a removed key.
const deadWord = dead << 24

// live reports whether s holds a key.
func (s *slot) live() bool { return s.k1 != 0 && s.k1 != deadWord }

// keyWords returns the words of a slot holding key, whose hash is h: both
// for a key held inline, and k1 only for a long key (k0 is its offset in
// the arena, 0 here).
func keyWords(h uint64, key string) (uint64, uint32) {
	n := len(key)
	if n > inlineMax {
		return 0, uint32(h)&0xffffff | longKey<<24
	}
	if n < 8 {
		return upTo8(key), uint32(n+1) << 24
	}
	return load8(key), uint32(upTo8(key[8:])) | uint32(n+1)<<24
}

// load8 returns the first 8 bytes of s, little-endian: the compiler makes
// one load of them.
func load8(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// load4 is load8 for 4 bytes.
func load4(s string) uint64 {
	_ = s[3]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24
}

// upTo8 returns the bytes of s, at most 8, little-endian, without copying
// them (a copy and a wider load back stall on store forwarding): two
// loads that overlap where len(s) is not 4 or 8 (the bytes they share
// land on the same bits, so or-ing them is exact).
func upTo8(s string) uint64 {
	switch n := len(s); {
	case n >= 8:
		return load8(s)
	case n >= 4:
		return load4(s) | load4(s[n-4:])<<(8*(n-4))
	case n > 0:
		return uint64(s[0]) | uint64(s[n/2])<<(8*(n/2)) | uint64(s[n-1])<<(8*(n-1))
	}
	return 0
}

// cell returns the state of sh's slot i, for a caller that holds the lock.
func (sh *shard) cell(i int) algo.Cell { return sh.cellOf(i, atomic.LoadInt64(&sh.slots[i].word)) }

// cellOf returns the state of sh's slot i whose word is w.
func (sh *shard) cellOf(i int, w int64) algo.Cell {
	var y uint32
	if sh.ys != nil {
		y = sh.ys[i]
	}
	return algo.MakeCell(w&^held, sh.slots[i].x, y)
}

// hold sets the held bit of the word of sh's slot i, so that no
// decideFast changes it until setCell puts a state there (fast.go
// invariant 2), and returns the slot's state.
func (sh *shard) hold(i int) algo.Cell {
	if !sh.fast {
		return sh.cell(i)
	}
	return sh.cellOf(i, atomic.OrInt64(&sh.slots[i].word, held))
}

// setCell puts c in sh's slot i, whose word the caller holds (see hold)
// in a table with decideFast, held still when c has a fraction (fast.go
// invariant 3).
func (sh *shard) setCell(i int, c algo.Cell) {
	t, x, y := c.Parts()
	s := &sh.slots[i]
	s.x = x
	w := t
	if x != 0 {
		w |= held
	}
	if sh.fast {
		atomic.StoreInt64(&s.word, w)
	} else {
		s.word = w
	}
	if sh.ys != nil {
		sh.ys[i] = y
	}
}

// keyOf returns the bytes of s's key, in buf or in sh's arena.
func (sh *shard) keyOf(s *slot, buf *[12]byte) []byte {
	if n := marker(s.k1); n != longKey {
		binary.LittleEndian.PutUint64(buf[:8], s.k0)
		binary.LittleEndian.PutUint32(buf[8:], s.k1)
		return buf[: n-1 : n-1]
	}
	off, n := sh.arenaKey(s)
	return sh.arena[off : off+n : off+n]
}

// arenaKey returns the offset and length of the bytes of long key s in
// sh's arena, past its length.
func (sh *shard) arenaKey(s *slot) (int, int) {
	off := int(s.k0)
	n, k := binary.Uvarint(sh.arena[off:])
	return off + k, int(n)
}

// hashOf returns the hash of the key of slot s of sh.
func (t *Table) hashOf(sh *shard, s *slot) uint64 {
	var buf [12]byte
	return maphash.Bytes(t.seed, sh.keyOf(s, &buf))
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
	atomic.StoreUint64(&s.k0, w0)
	atomic.StoreUint32(&s.k1, w1) // last: fast.go invariant 5
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
		if marker(s.k1) != longKey {
			continue
		}
		from := s.k0
		n, k := binary.Uvarint(old[from:])
		s.k0 = uint64(len(sh.arena)) // a lookup without the lock never reads a long key's k0
		sh.arena = append(sh.arena, old[from:from+uint64(k)+n]...)
	}
	sh.dead = 0
}

// dropKey marks the key of s as removed, counts the bytes of a long one
// as dead, and compacts the arena once more than half of it is dead; it
// returns the bytes that freed, as the Budget counts them.
func (sh *shard) dropKey(s *slot) int64 {
	long := marker(s.k1) == longKey
	var n int
	if long {
		_, n = sh.arenaKey(s)
	}
	atomic.StoreUint32(&s.k1, deadWord)
	if !long {
		return 0
	}
	sh.dead += arenaLen(n)
	if sh.dead*2 <= len(sh.arena) || sh.dead < 256 {
		return 0
	}
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
