package envoyrls

import (
	"net"
	"testing"
	"time"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/failsafe"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/redis/go-redis/v9"
)

// While the store is down, failsafe's mode decides, on every kind of
// rule: FailOpen lets every descriptor through (OK, nothing remaining
// known), a fixed window's as well as a bucket's; FailClosed fails the
// request (Unavailable, which Envoy's failure_mode_deny turns into a
// refusal). The store is a real Redis address that refuses connections.
func TestFailModesOnAStoreThatIsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	const cfg = basics + `  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token-bucket, burst: 4}
`
	for _, c := range []struct {
		mode failsafe.Mode
		want string
	}{
		{failsafe.FailOpen, "OK: OK 10/MINUTE t=1m0s | OK 60/MINUTE t=0s"},
		{failsafe.FailClosed, "error"},
	} {
		t.Run(c.mode.String(), func(t *testing.T) {
			rc := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
			defer rc.Close()
			rs, err := redisstore.New(rc)
			if err != nil {
				t.Fatal(err)
			}
			fs := newFailsafe(rs, failsafe.Options{Mode: c.mode, Timeout: 10 * time.Second})
			s := NewService(mustParse(t, cfg), fs, WithClock(clock.NewFake(t0)))
			defer s.Close(t.Context())
			for i := range 3 {
				req := request("d", descriptor("ten", "x"), descriptor("bucket", "x"))
				resp, err := s.ShouldRateLimit(t.Context(), req)
				got := "error"
				if err == nil {
					got = summary(resp)
				}
				if got != c.want {
					t.Errorf("request %d with the store down, %v: %s (%v), want %s", i, c.mode, got, err, c.want)
				}
			}
		})
	}
}
