package envoyrls

import (
	"context"
	"fmt"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/redisstore"
)

// TestSkewedClockOnRedis (issue 28 item 4): a service on a real
// redis-server, with the store's defaults (Redis's clock for its
// decisions), whose own clock is Redis's (TIME, read before each request)
// skewed by ±500 ms and +2 ms. Its fixed window's OK answers, in every
// window that the service's clock saw whole, are those of a clock in
// step (the limit, within 1%), and never more than the limit in any
// window: the counters and the answers from memory both place a window
// by the service's clock. The test runs through its windows in Redis's
// real time, which it cannot fake: about three seconds, the skews at once.
func TestSkewedClockOnRedis(t *testing.T) {
	const limit, windows = 20, 2
	srv := redistest.NewServer(t)
	for _, skew := range []time.Duration{0, 500 * time.Millisecond, -500 * time.Millisecond, 2 * time.Millisecond} {
		t.Run(fmt.Sprint(skew), func(t *testing.T) {
			t.Parallel()
			rs, err := redisstore.New(srv.Client(t), redisstore.WithPrefix(fmt.Sprintf("skew%v:", skew)), redisstore.WithTimeout(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			cfg := mustParse(t, fmt.Sprintf("domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: %d}\n", limit))
			clk := clock.NewFake(t0)
			s := NewService(cfg, rs, WithClock(clk))
			ok := okBySecond(t, srv, s, clk, skew, windows+2)
			total := 0
			for w, n := range ok[1 : windows+1] { // the windows seen whole
				if n > limit {
					t.Errorf("skew %v: window %d answered %d OK, over the limit of %d", skew, w+1, n, limit)
				}
				total += n
			}
			if want := limit * windows; total*100 < want*99 {
				t.Errorf("skew %v: %d OK in %d whole windows, want %d (a clock in step's) within 1%%; by window %v",
					skew, total, windows, want, ok)
			}
		})
	}
}

// okBySecond asks s for user=u, its clock clk set to Redis's time plus
// skew before each request, until clk has started n windows of a second,
// and returns the OK answers in each, the first one partial.
func okBySecond(t *testing.T, srv *redistest.Server, s *Service, clk *clock.Fake, skew time.Duration, n int) []int {
	ctx := context.Background()
	c := srv.Client(t)
	req := request("d", descriptor("user", "u"))
	ok := make([]int, n)
	first := int64(-1)
	for {
		now, err := c.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		at := now.Add(skew)
		w := at.Unix()
		if first < 0 {
			first = w
		}
		if w-first >= int64(n) {
			return ok
		}
		clk.Set(at)
		resp, err := s.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetOverallCode() == rlsv3.RateLimitResponse_OK {
			ok[w-first]++
		}
	}
}
