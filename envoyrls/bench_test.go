package envoyrls

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/floodgate/floodgate/memstore"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

const benchConfig = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: tenant
    value: acme
    descriptors:
      - key: path
        value: /api/*
        rate_limit: {unit: minute, requests_per_unit: 1000000000}
  - key: api_key
    rate_limit: {unit: minute, requests_per_unit: 1000000000, algorithm: token-bucket}
  - key: user
    rate_limit: {unit: day, requests_per_unit: 1}
`

// benchShouldRateLimit decides requests of the descriptors made by descs
// from a per-goroutine counter, on the real clock and the memory store.
func benchShouldRateLimit(b *testing.B, keys int, descs func(i int) *rlsv3.RateLimitRequest, opts ...Option) {
	s := NewService(mustParse(b, benchConfig), memstore.New(0), opts...)
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1)) * 7919
		for pb.Next() {
			i++
			if _, err := s.ShouldRateLimit(context.Background(), descs(i%keys)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkShouldRateLimit(b *testing.B) {
	addrs := make([]*rlsv3.RateLimitRequest, 10000)
	for i := range addrs {
		addrs[i] = request("edge", descriptor("remote_address", "10.0."+strconv.Itoa(i/256)+"."+strconv.Itoa(i%256)))
	}
	b.Run("one descriptor", func(b *testing.B) {
		benchShouldRateLimit(b, len(addrs), func(i int) *rlsv3.RateLimitRequest { return addrs[i] })
	})
	for _, h := range []Headers{RateLimitHeaders, UpstreamHeaders} {
		b.Run("one descriptor, headers "+h.String(), func(b *testing.B) {
			benchShouldRateLimit(b, len(addrs), func(i int) *rlsv3.RateLimitRequest { return addrs[i] }, WithResponseHeaders(h))
		})
	}
	three := make([]*rlsv3.RateLimitRequest, len(addrs))
	for i := range three {
		three[i] = request("edge", addrs[i].Descriptors[0], descriptor("tenant", "acme", "path", "/api/"+strconv.Itoa(i%100)),
			descriptor("api_key", strconv.Itoa(i%1000)))
	}
	// Keys over their limit, as in bench's BenchmarkFloodService: answered
	// from memory once the store has found each over.
	users := make([]*rlsv3.RateLimitRequest, 1000)
	for i := range users {
		users[i] = request("edge", descriptor("user", "flood:user:"+strconv.Itoa(i)))
	}
	b.Run("one descriptor, over the limit", func(b *testing.B) {
		benchShouldRateLimit(b, len(users), func(i int) *rlsv3.RateLimitRequest { return users[i] })
	})
	b.Run("three descriptors", func(b *testing.B) {
		benchShouldRateLimit(b, len(three), func(i int) *rlsv3.RateLimitRequest { return three[i] })
	})
}

func BenchmarkParseConfig(b *testing.B) {
	files := map[string][]byte{"a.yaml": []byte(everyFeature), "b.yaml": []byte(matching)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseConfig(files); err != nil {
			b.Fatal(err)
		}
	}
}
