package envoyrls

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/memstore"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/store"
)

// t0 is the tests' starting instant: a whole number of days since the
// Unix epoch, so that second, minute, hour and day windows begin at it.
var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// newService returns a service on a fresh memory store, configured by
// yamlText, reading a fake clock set to t0.
func newService(t testing.TB, yamlText string, opts ...Option) (*Service, *clock.Fake) {
	t.Helper()
	return newServiceWith(t, mustParse(t, yamlText), opts...)
}

// newServiceWith is newService with a parsed configuration.
func newServiceWith(t testing.TB, cfg *Config, opts ...Option) (*Service, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	return NewService(cfg, memstore.New(0), append([]Option{WithClock(clk)}, opts...)...), clk
}

// descriptor builds a request descriptor from key, value pairs.
func descriptor(kv ...string) *ratelimitv3.RateLimitDescriptor {
	return &ratelimitv3.RateLimitDescriptor{Entries: entries(kv...)}
}

func request(domain string, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: descs}
}

// call asks s, failing the test on an error, and returns the answer's summary.
func call(t testing.TB, s *Service, req *rlsv3.RateLimitRequest) string {
	t.Helper()
	resp, err := s.ShouldRateLimit(context.Background(), req)
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return summary(resp)
}

// summary writes a response compactly: the overall code, then each
// status as CODE [LIMIT/UNIT] [r=REMAINING] [t=RESET], such as
//
//	OVER_LIMIT: OK 2/MINUTE r=1 t=60s | OVER_LIMIT 1/MINUTE t=60s | OK
func summary(resp *rlsv3.RateLimitResponse) string {
	var b strings.Builder
	b.WriteString(resp.GetOverallCode().String())
	b.WriteString(":")
	for i, st := range resp.GetStatuses() {
		if i > 0 {
			b.WriteString(" |")
		}
		b.WriteString(" " + st.GetCode().String())
		if l := st.GetCurrentLimit(); l != nil {
			fmt.Fprintf(&b, " %d/%s", l.GetRequestsPerUnit(), l.GetUnit())
			if m := l.GetUnitMultiplier(); m != nil {
				fmt.Fprintf(&b, "x%d", m.GetValue())
			}
		}
		if st.GetLimitRemaining() != 0 {
			fmt.Fprintf(&b, " r=%d", st.GetLimitRemaining())
		}
		if d := st.GetDurationUntilReset(); d != nil {
			fmt.Fprintf(&b, " t=%v", d.AsDuration())
		}
	}
	return b.String()
}

// brokenStore is a store that fails: every table whose name begins with
// refused (a domain's, its counters' too) cannot be made, and every decision of the others fails with err.
type brokenStore struct {
	refused string
	err     error
}

func (s brokenStore) Table(name string, p algo.Policy) (store.Table, error) {
	if s.refused != "" && strings.HasPrefix(name, s.refused) {
		return nil, fmt.Errorf("brokenStore: %w: cannot hold %q", store.ErrInvalidKey, name)
	}
	return brokenTable{s.err}, nil
}

func (s brokenStore) Apply(context.Context, []store.Op) error     { return s.err }
func (s brokenStore) ApplyEach(context.Context, []store.Op) error { return s.err }

type brokenTable struct{ err error }

func (t brokenTable) Decide(ctx context.Context, _ string, _, _ int64) (algo.Decision, error) {
	if err := ctx.Err(); err != nil {
		return algo.Decision{}, err
	}
	return algo.Decision{}, t.err
}

// parseRequest reads a request written as the domain, a space, then the
// descriptors separated by " ; ", each entries k=v separated by ',':
//
//	edge remote_address=10.0.0.1 ; tenant=acme,path=/api
func parseRequest(s string) *rlsv3.RateLimitRequest {
	domain, rest, _ := strings.Cut(s, " ")
	req := request(domain)
	for _, d := range strings.Split(rest, " ; ") {
		var kv []string
		for _, e := range strings.Split(d, ",") {
			k, v, _ := strings.Cut(e, "=")
			kv = append(kv, k, v)
		}
		req.Descriptors = append(req.Descriptors, descriptor(kv...))
	}
	return req
}

// A step is a request to a service and its answer, as summary writes it.
type step struct {
	after time.Duration // advance the clock first
	req   string        // as parseRequest reads it
	want  string
}

// runSteps asks a new service with cfg, on a fresh memory store and a
// fake clock at t0, each step's request in turn.
func runSteps(t *testing.T, cfg *Config, steps []step, opts ...Option) {
	t.Helper()
	clk := clock.NewFake(t0)
	s := NewService(cfg, memstore.New(0), append([]Option{WithClock(clk)}, opts...)...)
	for i, st := range steps {
		clk.Advance(st.after)
		if got := call(t, s, parseRequest(st.req)); got != st.want {
			t.Errorf("step %d, %s:\n got  %s\n want %s", i, st.req, got, st.want)
		}
	}
}
