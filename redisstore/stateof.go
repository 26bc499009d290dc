package redisstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/floodgate/floodgate/algo"
)

// stateIn returns the state in v, the fill's read of a key of a table
// of algorithm a (GET, or HGETALL for a sliding log, as the tracking
// connection reads them: a string, a null, or a map's keys and values
// in turn), and whether the key was there.
func stateIn(a algo.Algorithm, v any) (st algo.State, found bool, err error) {
	switch v := v.(type) {
	case nil:
		return st, false, nil
	case string:
		st, err = stateOf(a, v)
		return st, true, err
	case []any:
		if len(v) == 0 {
			return st, false, nil
		}
		h := make(map[string]string, len(v)/2)
		for i := 0; i+1 < len(v); i += 2 {
			k, _ := v[i].(string)
			h[k], _ = v[i+1].(string)
		}
		st, err = logOf(h)
		return st, true, err
	}
	return st, false, fmt.Errorf("redisstore: a read of %T", v)
}

// logOf returns the state in h, a sliding log's Redis hash (lua/log.lua:
// fields h, c and u, the index of the oldest entry, the number of entries
// and their units, and "T N" at each entry's index): an error wrapping
// ErrCorrupt for anything else.
func logOf(h map[string]string) (algo.State, error) {
	var st algo.State
	head, err1 := strconv.ParseUint(h["h"], 10, 53)
	count, err2 := strconv.ParseUint(h["c"], 10, 53)
	units, err3 := strconv.ParseUint(h["u"], 10, 53)
	if errors.Join(err1, err2, err3) != nil || uint64(len(h)) != 3+count {
		return st, fmt.Errorf("%w: a sliding log of %d fields", ErrCorrupt, len(h))
	}
	// algo's encoding: its version byte, the algorithm, the number of
	// entries, then each as its gap from the one before and its units,
	// varints.
	b, _ := st.MarshalBinary()
	b = append(b[:1], byte(algo.SlidingLog))
	b = binary.AppendUvarint(b, count)
	var prev, sum uint64
	for i := range count {
		v := h[strconv.FormatUint(head+i, 10)]
		ts, ns, _ := strings.Cut(v, " ")
		t, err1 := strconv.ParseUint(ts, 10, 63)
		n, err2 := strconv.ParseUint(ns, 10, 53)
		if sum += n; err1 != nil || err2 != nil || t < prev || sum > maxExact {
			return st, fmt.Errorf("%w: sliding-log entry %d is %q", ErrCorrupt, head+i, v)
		}
		b = binary.AppendUvarint(b, t-prev)
		b = binary.AppendUvarint(b, n)
		prev = t
	}
	if sum != units {
		return st, fmt.Errorf("%w: a sliding log of %d units whose entries hold %d", ErrCorrupt, units, sum)
	}
	if err := st.UnmarshalBinary(b); err != nil {
		return st, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return st, nil
}

// stateOf returns the state in v, a bucket's or window's Redis value
// (lua/batch.lua), for a table of algorithm a: an error for anything else.
func stateOf(a algo.Algorithm, v string) (algo.State, error) {
	var st algo.State
	if len(v) != 33 || algo.Algorithm(v[0]) != a {
		return st, fmt.Errorf("%w: a value of %d bytes", ErrCorrupt, len(v))
	}
	var f [4]int64
	for i := range f {
		x := math.Float64frombits(binary.LittleEndian.Uint64([]byte(v[1+8*i : 9+8*i])))
		if x < 0 || x != math.Trunc(x) || x > maxExact {
			return st, fmt.Errorf("%w: %v in a state", ErrCorrupt, x)
		}
		f[i] = int64(x)
	}
	// T is seconds and nanoseconds (lua/pair.lua): checked before they
	// are joined, so that no product wraps into a valid time.
	if f[1] >= 1e9 || f[0] > (algo.MaxTime+int64(algo.MaxDrain))/1e9 {
		return st, fmt.Errorf("%w: a time of %d s and %d ns in a state", ErrCorrupt, f[0], f[1])
	}
	// algo's encoding: its version byte, the algorithm, then T, X and Y
	// as varints.
	b, _ := st.MarshalBinary()
	b = append(b[:1], byte(a))
	b = binary.AppendUvarint(b, uint64(f[0]*1e9+f[1]))
	b = binary.AppendUvarint(b, uint64(f[2]))
	b = binary.AppendUvarint(b, uint64(f[3]))
	if err := st.UnmarshalBinary(b); err != nil {
		return st, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return st, nil
}
