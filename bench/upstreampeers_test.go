package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coocood/freecache"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/ratelimit/src/config"
	"github.com/envoyproxy/ratelimit/src/provider"
	uredis "github.com/envoyproxy/ratelimit/src/redis"
	userver "github.com/envoyproxy/ratelimit/src/server"
	uservice "github.com/envoyproxy/ratelimit/src/service"
	"github.com/envoyproxy/ratelimit/src/settings"
	gostats "github.com/lyft/gostats"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/envoyrls"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/memstore"
	"github.com/floodgate/floodgate/redisstore"
	"github.com/floodgate/floodgate/store"
)

// The services the upstream suite compares, each asked over real gRPC on
// loopback and reading one fake clock: floodgate's envoyrls on its memory
// store and on a real redis-server, and envoyproxy/ratelimit's own service
// (its service and Redis cache packages, wired as its runner wires them)
// on the same redis-server. Upstream reads the time through its
// utils.TimeSource, which here reads the fake clock, so that both decide
// at the same instants and the test never depends on the real time.

// suiteT0 is the fake clocks' starting instant: a whole number of days
// since the Unix epoch, so that every window up to a day begins at it.
var suiteT0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// keyTTL is how long the Redis keys of both implementations live in
// real time: the fake clock stands still while real time passes, and a
// window's key expiring by real time (upstream sets EXPIRE to the unit,
// one second for a per-second limit) would reset a count that the fake
// clock says is current.
const keyTTL = time.Hour

// A peer is one service under test: a client of its gRPC service and
// one of its HTTP form (POST /json).
type peer struct {
	name         string
	client, json rlsv3.RateLimitServiceClient
	setConfig    func(t testing.TB, files map[string][]byte)
	// service is the service itself, called in this goroutine.
	service rlsv3.RateLimitServiceServer
}

// suitePrefixes number the peers' Redis key prefixes, so that every peer of
// every test starts on empty keys.
var suitePrefixes atomic.Int64

// newPeers starts the three peers on files, on the redis-server srv, with
// the fake clock clk; t's cleanup stops them. Upstream's is the last:
// runSteps takes it as the reference.
func newPeers(t testing.TB, srv *redistest.Server, clk *clock.Fake, files map[string][]byte, opts ...envoyrls.Option) []peer {
	t.Helper()
	return append(newFloodgatePeers(t, srv, clk, files, opts...), newUpstreamPeer(t, srv, upstreamVariant{}, clk, files))
}

// newFloodgatePeers starts envoyrls on files on the memory store and on
// srv, with opts.
func newFloodgatePeers(t testing.TB, srv *redistest.Server, clk *clock.Fake, files map[string][]byte, opts ...envoyrls.Option) []peer {
	t.Helper()
	rs, err := redisstore.New(srv.Client(t), redisstore.WithCallerTime(), redisstore.WithMinTTL(keyTTL),
		redisstore.WithPrefix(fmt.Sprintf("fg%d:", suitePrefixes.Add(1))))
	if err != nil {
		t.Fatal(err)
	}
	return []peer{
		newFloodgatePeer(t, "floodgate/memory", memstore.New(0), clk, files, opts...),
		newFloodgatePeer(t, "floodgate/redis", rs, clk, files, opts...),
	}
}

func newFloodgatePeer(t testing.TB, name string, st store.Store, clk *clock.Fake, files map[string][]byte, opts ...envoyrls.Option) peer {
	t.Helper()
	cfg, err := envoyrls.ParseConfig(files)
	if err != nil {
		t.Fatal(err)
	}
	s := envoyrls.NewService(cfg, st, append([]envoyrls.Option{envoyrls.WithClock(clk)}, opts...)...)
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, s)
	return peer{name: name, client: serveGRPC(t, gs), json: serveJSON(t, s.JSONHandler()), service: s, setConfig: func(t testing.TB, files map[string][]byte) {
		cfg, err := envoyrls.ParseConfig(files)
		if err != nil {
			t.Fatal(err)
		}
		s.SetConfig(cfg)
	}}
}

// serveGRPC serves gs on a loopback port until t ends, and returns a
// client of it.
func serveGRPC(t testing.TB, gs *grpc.Server) rlsv3.RateLimitServiceClient {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// serveJSON serves h at /json on a loopback port until t ends, and
// returns a client of it.
func serveJSON(t testing.TB, h http.Handler) rlsv3.RateLimitServiceClient {
	mux := http.NewServeMux()
	mux.Handle("/json", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return jsonClient{srv.URL + "/json"}
}

// jsonClient asks a service over HTTP, POST /json.
type jsonClient struct{ url string }

// An httpError is an answer of /json that carries no response.
type httpError struct{ status int }

func (e httpError) Error() string { return fmt.Sprintf("HTTP %d", e.status) }

// ShouldRateLimit posts in and returns the response, or an httpError when
// the status is not 200 or 429, or is not the one the response's overall
// code calls for.
func (j jsonClient) ShouldRateLimit(ctx context.Context, in *rlsv3.RateLimitRequest, _ ...grpc.CallOption) (*rlsv3.RateLimitResponse, error) {
	body, err := protojson.Marshal(in)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		return nil, httpError{resp.StatusCode}
	}
	var r rlsv3.RateLimitResponse
	if err := protojson.Unmarshal(out, &r); err != nil {
		return nil, err
	}
	if over := r.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT; over != (resp.StatusCode == http.StatusTooManyRequests) {
		return nil, fmt.Errorf("HTTP %d with %v", resp.StatusCode, r.GetOverallCode())
	}
	return &r, nil
}

// An upstreamVariant is a setting of upstream's under which its
// integration test runs its requests too, expecting the same answers.
type upstreamVariant struct {
	name       string
	perSecond  bool // REDIS_PERSECOND: per-second limits through a client of their own
	localCache int  // LOCAL_CACHE_SIZE_IN_BYTES: over-limit keys remembered in process
}

// newUpstreamPeer builds envoyproxy/ratelimit's service as its runner
// does with its Redis backend (settings at their defaults but for v's: one
// Redis, no local cache, no expiration jitter, statistics kept nowhere),
// on srv with keys under a prefix of their own, and its clock reading clk.
func newUpstreamPeer(t testing.TB, srv *redistest.Server, v upstreamVariant, clk *clock.Fake, files map[string][]byte) peer {
	t.Helper()
	logrus.SetLevel(logrus.ErrorLevel) // upstream logs every configuration load at info
	s := settings.NewSettings()
	sm := upstreamStats()
	ts := fakeTimeSource{clk}
	var perSecond uredis.Client
	if v.perSecond {
		perSecond = upstreamRedis(t, srv, s)
	}
	var local *freecache.Cache
	if v.localCache > 0 {
		local = freecache.NewCache(v.localCache)
	}
	cache := uredis.NewFixedRateLimitCacheImpl(upstreamRedis(t, srv, s), perSecond, ts, rand.New(rand.NewSource(1)), 0, local,
		s.NearLimitRatio, fmt.Sprintf("up%d:", suitePrefixes.Add(1)), sm, false)
	svc := uservice.NewService(cache, noProvider{}, sm, nil, ts, false, true, false)
	set := func(t testing.TB, files map[string][]byte) {
		t.Helper()
		cfg, err := upstreamLoad(files)
		if err != nil {
			t.Fatal(err)
		}
		svc.SetConfig(configEvent{cfg}, false)
	}
	set(t, files)
	gs := grpc.NewServer()
	rlsv3.RegisterRateLimitServiceServer(gs, svc)
	return peer{name: "upstream/redis", client: serveGRPC(t, gs), json: serveJSON(t, http.HandlerFunc(userver.NewJsonHandler(svc))),
		service: svc, setConfig: set}
}

// upstreamRedis is upstream's Redis client of srv, its EXPIREs made
// keyTTL; t's cleanup closes it.
func upstreamRedis(t testing.TB, srv *redistest.Server, s settings.Settings) uredis.Client {
	client := uredis.NewClientImpl(gostats.NewStore(gostats.NewNullSink(), false).Scope("redis_pool"), false, "", srv.Network(), "SINGLE", srv.Addr(), 2,
		s.RedisPipelineWindow, s.RedisPipelineLimit, nil, false, nil, s.RedisTimeout, s.RedisPoolOnEmptyBehavior, "")
	t.Cleanup(func() { client.Close() })
	return longExpiry{client}
}

// fakeTimeSource is upstream's clock (utils.TimeSource) reading a fake one.
type fakeTimeSource struct{ clk *clock.Fake }

func (f fakeTimeSource) UnixNow() int64 { return f.clk.Now().Unix() }

// longExpiry is upstream's Redis client with every EXPIRE made keyTTL.
type longExpiry struct{ uredis.Client }

func (c longExpiry) PipeAppend(p uredis.Pipeline, rcv any, cmd, key string, args ...any) uredis.Pipeline {
	if strings.EqualFold(cmd, "EXPIRE") {
		args = []any{int64(keyTTL / time.Second)}
	}
	return c.Client.PipeAppend(p, rcv, cmd, key, args...)
}

// noProvider is a configuration provider that never sends: the test sets
// upstream's configuration itself.
type noProvider struct{}

func (noProvider) ConfigUpdateEvent() <-chan provider.ConfigUpdateEvent { return nil }
func (noProvider) Stop()                                                {}

type configEvent struct{ cfg config.RateLimitConfig }

func (e configEvent) GetConfig() (config.RateLimitConfig, any) { return e.cfg, nil }

// A step is one request of a scenario.
type step struct {
	after  time.Duration     // advance the fake clock first
	config map[string][]byte // then, when not nil, set every peer's configuration to these files
	domain string
	descs  [][]string // each descriptor's entries as key, value, key, value...
	hits   uint32     // the request's hits_addend; 0 means 1
	// descHits are descriptors' own hits_addend, by index; override their
	// limit (Envoy's limit override), by index, as requests_per_unit and
	// unit, such as "3/MINUTE", or "3/MINUTEx2" with a unit_multiplier.
	descHits map[int]uint64
	override map[int]string
	want     string // upstream's answer (see summarize); "" checks only that every peer answers alike
	// overJSON sends the request to POST /json instead of gRPC.
	overJSON bool
	// fgWant, when not "", is floodgate's answer where it differs from
	// upstream's on purpose (envoyrls's package documentation).
	fgWant string
	// tag names the kind of step, for the known differences to find.
	tag string
}

func (s step) request() *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: s.domain, HitsAddend: s.hits}
	for i, kv := range s.descs {
		d := &ratelimitv3.RateLimitDescriptor{}
		for j := 0; j+1 < len(kv); j += 2 {
			d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[j], Value: kv[j+1]})
		}
		if h, ok := s.descHits[i]; ok {
			d.HitsAddend = wrapperspb.UInt64(h)
		}
		if o, ok := s.override[i]; ok {
			d.Limit = parseOverride(o)
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	return req
}

// parseOverride parses a limit override written N/UNIT or N/UNITxM.
func parseOverride(o string) *ratelimitv3.RateLimitDescriptor_RateLimitOverride {
	var n, mult uint32
	fields := strings.FieldsFunc(o, func(r rune) bool { return r == '/' || r == 'x' })
	fmt.Sscan(fields[0], &n)
	l := &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: typev3.RateLimitUnit(typev3.RateLimitUnit_value[fields[1]])}
	if len(fields) > 2 {
		fmt.Sscan(fields[2], &mult)
		l.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return l
}

func (s step) String() string {
	var ds []string
	for _, kv := range s.descs {
		var es []string
		for i := 0; i+1 < len(kv); i += 2 {
			es = append(es, kv[i]+"="+kv[i+1])
		}
		ds = append(ds, strings.Join(es, ","))
	}
	extra := ""
	if s.hits > 1 {
		extra = fmt.Sprintf(" hits=%d", s.hits)
	}
	if len(s.descHits) > 0 {
		extra += fmt.Sprintf(" descriptor hits=%v", s.descHits)
	}
	if len(s.override) > 0 {
		extra += fmt.Sprintf(" overrides=%v", s.override)
	}
	return fmt.Sprintf("%s [%s]%s", s.domain, strings.Join(ds, " ; "), extra)
}

// ask sends s's request to p and returns the answer's summary.
func ask(p peer, s step) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := p.client
	if s.overJSON {
		c = p.json
	}
	resp, err := c.ShouldRateLimit(ctx, s.request())
	if he, ok := errors.AsType[httpError](err); ok {
		return "error: " + he.Error()
	}
	if st, ok := grpcstatus.FromError(err); ok && err != nil {
		return fmt.Sprintf("error: %v: %s", st.Code(), st.Message())
	}
	if err != nil {
		return "error: " + err.Error()
	}
	return summarize(resp)
}

// askAll sends s's request to every peer at once, and returns their
// answers' summaries in the peers' order.
func askAll(peers []peer, s step) []string {
	answers := make([]string, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Go(func() { answers[i] = ask(p, s) })
	}
	wg.Wait()
	return answers
}

// summarize writes an answer compactly: the overall code, then each
// status as CODE [LIMIT/UNIT] [r=REMAINING] [t=RESET], such as
//
//	OVER_LIMIT: OK 20/MINUTE r=5 t=1m0s | OVER_LIMIT 10/HOUR t=1h0m0s
//
// and then anything else the answer holds.
func summarize(resp *rlsv3.RateLimitResponse) string {
	var b strings.Builder
	b.WriteString(resp.GetOverallCode().String() + ":")
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
			if l.GetName() != "" {
				fmt.Fprintf(&b, "(%s)", l.GetName())
			}
		}
		if st.GetLimitRemaining() != 0 {
			fmt.Fprintf(&b, " r=%d", st.GetLimitRemaining())
		}
		if d := st.GetDurationUntilReset(); d != nil {
			fmt.Fprintf(&b, " t=%v", d.AsDuration())
		}
	}
	for _, h := range resp.GetResponseHeadersToAdd() {
		fmt.Fprintf(&b, " [%s: %s]", h.GetKey(), h.GetValue())
	}
	for _, h := range resp.GetRequestHeadersToAdd() {
		fmt.Fprintf(&b, " [request %s: %s]", h.GetKey(), h.GetValue())
	}
	if m := resp.GetDynamicMetadata(); m != nil {
		// encoding/json sorts the keys: protojson's output is unstable.
		j, err := json.Marshal(m.AsMap())
		if err != nil {
			j = []byte(err.Error())
		}
		fmt.Fprintf(&b, " metadata=%s", j)
	}
	return b.String()
}
