package gubernator

import "testing"

// TestRNGCallers checks that concurrent callers draw keys of their own:
// 64 callers of 2,000 draws over 100,000 keys touch about 72,000 distinct
// keys when their sequences are unrelated; seeded one step apart, they
// touched 2,034.
func TestRNGCallers(t *testing.T) {
	const callers, draws, keys = 64, 2000, 100_000
	seen := make(map[uint64]bool)
	for range callers {
		r := newRNG()
		for range draws {
			seen[r.intn(keys)] = true
		}
	}
	if len(seen) < 60_000 {
		t.Fatalf("%d callers × %d draws over %d keys touched %d distinct keys, want at least 60,000",
			callers, draws, keys, len(seen))
	}
}
