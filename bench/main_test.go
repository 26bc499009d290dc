package bench

import (
	"testing"

	"github.com/floodgate/floodgate/internal/redistest"
)

// TestMain stops the redis-servers that BenchmarkRedis starts, whatever
// becomes of the benchmarks.
func TestMain(m *testing.M) { redistest.Main(m) }
