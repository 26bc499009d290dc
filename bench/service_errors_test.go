package bench

import (
	"context"
	"errors"
	"flag"
	"sync/atomic"
	"testing"
)

// flakyService admits every check and fails every other request after
// its first four, as a service whose store times out now and then.
type flakyService struct{ calls atomic.Int64 }

func (f *flakyService) Check(_ context.Context, keys []string) (int, error) {
	if n := f.calls.Add(1); n > 4 && n%2 == 0 {
		return 0, errors.New("store timeout")
	}
	return len(keys), nil
}

// TestRunServiceErrors checks that errors in the timed part are reported
// in err/op, the run's other figures kept, rather than failing it.
func TestRunServiceErrors(t *testing.T) {
	// 100 requests, not a second's worth: testing.Benchmark reads the flag.
	bt := flag.Lookup("test.benchtime")
	was := bt.Value.String()
	if err := bt.Value.Set("100x"); err != nil {
		t.Fatal(err)
	}
	defer bt.Value.Set(was)
	r := testing.Benchmark(func(b *testing.B) { runService(b, &flakyService{}, 1, 2) })
	if r.N == 0 {
		t.Fatal("runService failed the benchmark on errors in its timed part")
	}
	if e := r.Extra["err/op"]; e < 0.3 || e > 0.7 {
		t.Errorf("err/op = %v, want about 0.5; all: %v", e, r.Extra)
	}
	if r.Extra["decisions/s"] <= 0 {
		t.Errorf("decisions/s = %v, want the answered checks' rate", r.Extra["decisions/s"])
	}
}
