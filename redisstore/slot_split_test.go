package redisstore

import (
	"strings"
	"testing"
)

// refSlot is the hash slot of key as the Redis Cluster specification
// writes it, on the whole key: the reference for slot.
func refSlot(key string) uint16 {
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

// FuzzSlotSplit: the slot of a key given in two parts, split anywhere, is
// the slot of the whole key, hash tags within either part or across them.
func FuzzSlotSplit(f *testing.F) {
	for _, key := range []string{"", "user42", "{user:42}:api", "pre:{a}b", "a{}b{c}", "{", "}", "{}", "x{y", "x}y{z}",
		"floodgate:api @ token-bucket 10/1s:{tenant}:k", "{{a}}", "a{b}c{d}e", "123456789"} {
		f.Add(key)
	}
	f.Fuzz(func(t *testing.T, key string) {
		want := refSlot(key)
		for i := 0; i <= len(key); i++ {
			if got := slot(key[:i], key[i:]); got != want {
				t.Fatalf("slot(%q, %q) = %d, want %d", key[:i], key[i:], got, want)
			}
		}
	})
}

// The known slots of the specification's examples.
func TestSlotKnown(t *testing.T) {
	if got := slot("123456789", ""); got != 0x31C3&16383 {
		t.Errorf("slot(123456789) = %#x, want CRC16 0x31C3 mod 16384", got)
	}
	if slot("{user1000}.following", "") != slot("", "{user1000}.followers") {
		t.Error("keys with the same hash tag are in different slots")
	}
}
