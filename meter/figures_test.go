package meter_test

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/meter"
)

// t0 is the origin of every test's simulated clock.
var t0 = time.Unix(0, 0)

// at returns the instant d after t0.
func at(d time.Duration) time.Time { return t0.Add(d) }

// newBucket returns NewLeakyBucket(r, capacity, t0), failing the test on an
// error.
func newBucket(t testing.TB, r meter.Rate, capacity uint64) *meter.LeakyBucket {
	t.Helper()
	b, err := meter.NewLeakyBucket(r, capacity, t0)
	if err != nil {
		t.Fatalf("NewLeakyBucket(%v, %d): %v", r, capacity, err)
	}
	return b
}

// levels checks the units in the bucket and reserved after updating b to
// the given offset from t0.
func levels(t *testing.T, b *meter.LeakyBucket, d time.Duration, inBucket, reserved uint64) {
	t.Helper()
	b.UpdateState(at(d))
	if got := b.UnitsInBucket(); got != inBucket {
		t.Errorf("t0+%v: UnitsInBucket = %d, want %d", d, got, inBucket)
	}
	if got := b.UnitsReserved(); got != reserved {
		t.Errorf("t0+%v: UnitsReserved = %d, want %d", d, got, reserved)
	}
}

// The three figures of BDE's balb_leakybucket documentation: capacity 5,
// draining 1 unit per second.

func TestFigure1Submit(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1), 5)
	b.Submit(5)
	levels(t, b, 0, 5, 0)
	levels(t, b, 4*time.Second, 1, 0)
	b.Submit(2)
	levels(t, b, 4*time.Second, 3, 0)
	levels(t, b, 10*time.Second, 0, 0)
}

func TestFigure2OverCapacity(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1), 5)
	b.Submit(5)
	levels(t, b, 4*time.Second, 1, 0)
	b.Submit(6)
	levels(t, b, 4*time.Second, 7, 0) // above the capacity of 5, and held
	if !b.WouldOverflow(at(4 * time.Second)) {
		t.Error("WouldOverflow at 7 of 5 units = false")
	}
	levels(t, b, 10*time.Second, 1, 0)
}

func TestFigure3Reserve(t *testing.T) {
	b := newBucket(t, meter.PerSecond(1), 5)
	b.Reserve(4)
	levels(t, b, 0, 0, 4)
	levels(t, b, 5*time.Second, 0, 4) // reserved units do not drain
	levels(t, b, 6*time.Second, 0, 4)
	if err := b.SubmitReserved(3); err != nil {
		t.Fatal(err)
	}
	levels(t, b, 6*time.Second, 3, 1)
	levels(t, b, 9*time.Second, 0, 1)
	levels(t, b, 10*time.Second, 0, 1)
	if err := b.CancelReserved(1); err != nil {
		t.Fatal(err)
	}
	levels(t, b, 10*time.Second, 0, 0)
}

// TestUsageNetworkExample runs BDE's usage example on a simulated clock:
// 20 chunks of 256 bytes through a bucket draining 512 bytes/s with a
// capacity of 2560 bytes, checking for one byte before each chunk and
// waiting TimeToSubmit when it does not fit. Sending takes no simulated
// time.
func TestUsageNetworkExample(t *testing.T) {
	const (
		rate      = 512  // bytes per second
		capacity  = 2560 // bytes
		chunkSize = 256
		totalSize = 20 * chunkSize
	)
	b := newBucket(t, meter.PerSecond(rate), capacity)
	type send struct {
		at    time.Duration
		total uint64 // bytes sent by then
	}
	var sends []send
	var sent uint64
	now := time.Duration(0)
	for sent < totalSize {
		if !b.WouldOverflow(at(now)) {
			sent += chunkSize
			b.Submit(chunkSize)
			sends = append(sends, send{now, sent})
			continue
		}
		wait := b.TimeToSubmit(at(now))
		if wait <= 0 || wait == meter.Never {
			t.Fatalf("t0+%v: TimeToSubmit = %v while WouldOverflow is true", now, wait)
		}
		now += wait
	}
	if sent != totalSize {
		t.Errorf("sent %d bytes, want %d", sent, totalSize)
	}
	// Ten chunks fill the bucket at t0. The eleventh waits for one byte to
	// drain (1/512 s), each later one for 256 bytes (0.5s).
	const wantTotal = time.Second/512 + 9*time.Second/2
	if now != wantTotal {
		t.Errorf("total simulated time %v, want %v", now, wantTotal)
	}
	for i, s := range sends {
		want := time.Duration(0)
		if i >= 10 {
			want = time.Second/512 + time.Duration(i-10)*time.Second/2
		}
		if s.at != want {
			t.Errorf("chunk %d sent at t0+%v, want t0+%v", i+1, s.at, want)
		}
		// Bytes sent by t never exceed capacity + chunk + rate*t, in
		// nanosecond-seconds to stay in integers.
		if lhs, rhs := s.total*uint64(time.Second), (capacity+chunkSize)*uint64(time.Second)+rate*uint64(s.at); lhs > rhs {
			t.Errorf("t0+%v: %d bytes sent, more than capacity + chunk + rate*t = %d/1e9", s.at, s.total, rhs)
		}
	}
}
