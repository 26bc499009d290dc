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

// TestLogOf: a sliding log's hash as lua/log.lua writes it reads as
// algo's log of its entries; a hash the script could not have written is
// refused with ErrCorrupt, never read as some other log.
func TestLogOf(t *testing.T) {
	good := map[string]string{"h": "4", "c": "2", "u": "3", "4": "1500000000 1", "5": "2200000000 2"}
	st, err := logOf(good)
	if err != nil {
		t.Fatalf("a good log: %v", err)
	}
	var zero algo.State
	want, _ := zero.MarshalBinary()
	want = append(want[:1], byte(algo.SlidingLog), 2)
	want = binary.AppendUvarint(want, 1_500_000_000)
	want = append(want, 1)
	want = binary.AppendUvarint(want, 700_000_000)
	want = append(want, 2)
	if got, _ := st.MarshalBinary(); string(got) != string(want) {
		t.Fatalf("a good log read as %x, want %x", got, want)
	}
	with := func(k, v string) map[string]string {
		h := map[string]string{}
		for f, x := range good {
			h[f] = x
		}
		if v == "" {
			delete(h, k)
		} else {
			h[k] = v
		}
		return h
	}
	for name, h := range map[string]map[string]string{
		"no head":                 with("h", ""),
		"a count past its fields": with("c", "3"),
		"units not the entries'":  with("u", "4"),
		"a stray field":           with("6", "2300000000 1"),
		"an entry missing":        with("5", ""),
		"entries out of order":    with("5", "1400000000 2"),
		"two at one instant":      with("5", "1500000000 2"),
		"an empty entry":          with("5", "2200000000 0"),
		"a negative time":         with("4", "-1 1"),
		"a time past MaxTime":     with("5", "9223372036854775807 2"),
		"no units":                with("5", "2200000000"),
		"units past 2^53":         with("5", "2200000000 9007199254740993"),
		"a negative head":         with("h", "-1"),
	} {
		if _, err := logOf(h); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzLogOf: no hash makes logOf panic, and a log it reads encodes as
// algo encodes a log.
func FuzzLogOf(f *testing.F) {
	f.Add("4", "2", "3", "1500000000 1", "2200000000 2")
	f.Add("0", "1", "1", "0 1", "")
	f.Fuzz(func(t *testing.T, head, count, units, e0, e1 string) {
		h := map[string]string{"h": head, "c": count, "u": units, head: e0}
		if e1 != "" {
			h["x"+e1] = e1
		}
		st, err := logOf(h)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%v: %v, want ErrCorrupt", h, err)
			}
			return
		}
		b, _ := st.MarshalBinary()
		var back algo.State
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatalf("%v read as a state that does not decode: %v", h, err)
		}
	})
}
