package redisstore

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/floodgate/floodgate/algo"
)

// value encodes a bucket's or window's Redis value as lua/batch.lua
// writes it: the algorithm, then four doubles.
func value(a algo.Algorithm, f ...float64) string {
	b := []byte{byte(a)}
	for _, x := range f {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return string(b)
}

// TestStateOfRefusesBadTimes: a corrupt value whose seconds and
// nanoseconds would join into a time past the State's range, or wrap into
// it, is refused, never read as some other valid state.
func TestStateOfRefusesBadTimes(t *testing.T) {
	tb := algo.TokenBucket
	st, err := stateOf(tb, value(tb, 12, 345, 1, 0))
	if err != nil {
		t.Fatalf("a good value: %v", err)
	}
	var zero algo.State
	want, _ := zero.MarshalBinary()
	want = binary.AppendUvarint(append(want[:1], byte(tb)), 12_000_000_345)
	want = append(want, 1, 0)
	if got, _ := st.MarshalBinary(); string(got) != string(want) {
		t.Fatalf("a good value read as %x, want %x", got, want)
	}
	for name, v := range map[string]string{
		"nanoseconds of a second or more": value(tb, 1, 1e9, 0, 0),
		"seconds that wrap int64":         value(tb, 1<<53, 0, 0, 0),
		"seconds past MaxTime+MaxDrain":   value(tb, float64((algo.MaxTime+int64(algo.MaxDrain))/1e9+1), 0, 0, 0),
	} {
		if _, err := stateOf(tb, v); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}
