package redisstore

import (
	"strings"

	"github.com/floodgate/floodgate/store"
)

// slot returns the Redis Cluster hash slot of the key a + b, without
// building it: CRC16 (XMODEM) of its hash tag, the part between the first
// '{' and the next '}' when that part is not empty, or else of the whole
// key, modulo 16384 (the Redis Cluster specification). Keys with the same
// hash tag share a slot, so one script can decide them together.
func slot(a, b string) uint16 {
	if lo, hi, ok := hashTag(a, b); ok {
		// The tag, a[lo:hi] + b[lo-len(a):hi-len(a)], each part clamped.
		la, lb := len(a), len(b)
		return crc16(crc16(0, a[min(lo, la):min(hi, la)]), b[min(max(lo-la, 0), lb):max(hi-la, 0)]) & 16383
	}
	return crc16(crc16(0, a), b) & 16383
}

// hashTag returns the bounds, in a + b, of the hash tag of the key a + b,
// and false when it has none.
func hashTag(a, b string) (lo, hi int, ok bool) {
	open := strings.IndexByte(a, '{')
	if open < 0 {
		j := strings.IndexByte(b, '{')
		if j < 0 {
			return 0, 0, false
		}
		open = len(a) + j
	}
	lo, hi = open+1, -1
	if lo < len(a) {
		if j := strings.IndexByte(a[lo:], '}'); j >= 0 {
			hi = lo + j
		}
	}
	if hi < 0 {
		from := max(lo-len(a), 0)
		if j := strings.IndexByte(b[from:], '}'); j >= 0 {
			hi = len(a) + from + j
		}
	}
	return lo, hi, hi > lo
}

// crc16 returns the CRC16 of s continuing from crc.
func crc16(crc uint16, s string) uint16 {
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// crcTable is CRC16-CCITT's (polynomial 0x1021) table.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// clusterSlots is how many hash slots a Redis Cluster has.
const clusterSlots = 16384

// Partitions implements store.Partitioned: on a Redis Cluster, the hash
// slots, which its masters share out between them, so that a master down
// fails only the keys in its own slots; on a single Redis, one.
//
// The partitions are the slots, not the masters: which master serves a
// slot changes with failovers and resharding, which go-redis learns at
// its own pace, while a key's partition must stay the same for the
// store's life, and a partition whose master has gone must not stay
// down. So a master that fails takes its slots down one by one, each
// after its own run of failures (failsafe.Options.Threshold), and
// failsafe.Stats counts a trip for each; an ApplyEach across its slots
// counts its failure against each of them at once.
func (s *Store) Partitions() int {
	if !s.cluster {
		return 1
	}
	return clusterSlots
}

// Partition implements store.Partitioned: the hash slot of key in t on a
// Redis Cluster, and 0 on a single Redis or for a table of another store.
func (s *Store) Partition(t store.Table, key string) int {
	rt, ok := t.(*table)
	if !ok || rt.store != s {
		return 0
	}
	return int(s.keySlot(rt, key))
}
