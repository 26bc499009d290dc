package bench

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestFloorPeer: the floor is listed as a Floor, and admits on one key what
// a token bucket of its quota does, a full burst and then nothing (the
// quotas here refill one token in 6 minutes or more, far longer than the
// test), from one goroutine or from two racing on the word.
func TestFloorPeer(t *testing.T) {
	var p Peer
	for _, q := range Peers {
		if q.Name == "floor" {
			p = q
		}
	}
	if !p.Floor || !p.Keyed || !p.Denies || p.Note == "" || ClockReads[p.Name] != "floodgate" {
		t.Fatalf("the floor peer is %+v with clock %q, want a keyed, denying Floor with a note, reading floodgate's clock",
			p, ClockReads[p.Name])
	}
	for _, c := range []struct {
		name  string
		q     Quota
		burst int
	}{{"Low", Low, 10}, {"PerUser", PerUser, 1000}} {
		t.Run(c.name, func(t *testing.T) {
			for _, callers := range []int{1, 2} {
				l := p.New(c.q)
				defer l.Close()
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for range callers {
					wg.Go(func() {
						for range c.burst + 5 {
							if ok, err := l.Allow("user:1"); err != nil {
								t.Error(err)
							} else if ok {
								admitted.Add(1)
							}
						}
					})
				}
				wg.Wait()
				if n := int(admitted.Load()); n != c.burst {
					t.Errorf("%d callers: admitted %d of %d calls on one key, want the burst, %d",
						callers, n, callers*(c.burst+5), c.burst)
				}
			}
		})
	}
}
