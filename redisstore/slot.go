package redisstore

import (
	"strings"

	"github.com/floodgate/floodgate/store"
)

// slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag, the part between the first '{' and the next '}' when that part
// is not empty, or else of the whole key, modulo 16384 (the Redis Cluster
// specification). Keys with the same hash tag share a slot, so one script
// can decide them together.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^key[i]]
	}
	return crc & 16383
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
