package grpclimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate/floodgate/failsafe"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/store"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

const (
	checkMethod = "/grpc.health.v1.Health/Check"
	watchMethod = "/grpc.health.v1.Health/Watch"
	service     = "/grpc.health.v1.Health/"
)

func newLimiter(t testing.TB, policy string, opts ...floodgate.Option) *floodgate.Limiter {
	t.Helper()
	p, err := algo.ParsePolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	return floodgate.Must(floodgate.NewLimiter(p, append([]floodgate.Option{floodgate.WithClock(clock.NewFake(t0))}, opts...)...))
}

// seen records the decisions that reach the handlers, read from their
// contexts by an interceptor chained after the limiter's.
type seen struct {
	mu sync.Mutex
	ds []string
}

func (s *seen) record(ctx context.Context) {
	d, ok := DecisionFrom(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ds = append(s.ds, fmt.Sprintf("%v/%v/%d", ok, d.Allowed, d.Remaining))
}

func (s *seen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.ds, " ")
}

// start runs a real gRPC server with the health service on a loopback TCP
// port, limited by i, and returns a client connected to it.
func start(t *testing.T, i *Interceptor) (healthpb.HealthClient, *seen) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var s seen
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(i.Unary(), func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			s.record(ctx)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(i.Stream(), func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			s.record(ss.Context())
			return h(srv, ss)
		}))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn), &s
}

func check(c healthpb.HealthClient, md ...string) error {
	ctx := context.Background()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{})
	return err
}

// watch opens a Watch stream and reads its first message.
func watch(c healthpb.HealthClient) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return err
	}
	_, err = st.Recv()
	return err
}

// retryDelay returns the RetryInfo delay in err's status, or -1.
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.RetryDelay.AsDuration()
		}
	}
	return -1
}

func TestUnaryDenied(t *testing.T) {
	i := New(newLimiter(t, "fixed-window 2/1m"))
	c, s := start(t, i)
	for k := range 2 {
		if err := check(c); err != nil {
			t.Fatalf("call %d: %v", k, err)
		}
	}
	err := check(c)
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("3rd call: %v, want ResourceExhausted", err)
	}
	if d := retryDelay(err); d != time.Minute {
		t.Errorf("RetryInfo %v, want 1m", d)
	}
	if msg := status.Convert(err).Message(); msg != "rate limit exceeded: retry in 60s" {
		t.Errorf("message %q", msg)
	}
	if got := s.String(); got != "true/true/1 true/true/0" {
		t.Errorf("handlers saw %s", got)
	}
	if st := i.Stats(); st.Denied != 1 {
		t.Errorf("Stats %+v", st)
	}
}

func TestRetryInfoExact(t *testing.T) {
	c, _ := start(t, New(newLimiter(t, "token-bucket 3/1s")))
	for range 3 {
		check(c)
	}
	if d := retryDelay(check(c)); d != 333333334*time.Nanosecond {
		t.Errorf("RetryInfo %v, want 333.333334ms (exact, rounded up to the ns)", d)
	}
}

func TestStreamDenied(t *testing.T) {
	c, s := start(t, New(newLimiter(t, "fixed-window 2/1m")))
	for k := range 2 {
		if err := watch(c); err != nil {
			t.Fatalf("stream %d: %v", k, err)
		}
	}
	err := watch(c)
	if status.Code(err) != codes.ResourceExhausted || retryDelay(err) != time.Minute {
		t.Fatalf("3rd stream: %v (RetryInfo %v)", err, retryDelay(err))
	}
	if got := s.String(); got != "true/true/1 true/true/0" {
		t.Errorf("handlers saw %s", got)
	}
}

func TestQuotaFailure(t *testing.T) {
	l := newLimiter(t, "fixed-window 1/1m", floodgate.WithName("per-client"))
	c, _ := start(t, New(l, WithQuotaFailure()))
	check(c)
	err := check(c)
	var qf *errdetails.QuotaFailure
	for _, d := range status.Convert(err).Details() {
		if q, ok := d.(*errdetails.QuotaFailure); ok {
			qf = q
		}
	}
	if qf == nil || len(qf.Violations) != 1 || qf.Violations[0].Subject != "limit:per-client" ||
		qf.Violations[0].Description != "fixed-window 1/1m exceeded" || retryDelay(err) != time.Minute {
		t.Errorf("details %v", status.Convert(err).Details())
	}
}

func TestPerMethod(t *testing.T) {
	fc := clock.NewFake(t0)
	checks := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1m"), floodgate.WithName("checks"), floodgate.WithClock(fc)))
	all := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 3/1m"), floodgate.WithName("all"), floodgate.WithClock(fc)))
	i := NewAll([]Limit{
		{Limiter: checks, Methods: []string{checkMethod}},
		{Limiter: all, Methods: []string{service}},
	})
	c, s := start(t, i)
	var got []string
	for _, call := range []func() error{
		func() error { return check(c) }, // checks 0 left, all 2 left
		func() error { return check(c) }, // denied by checks: all spends nothing
		func() error { return watch(c) }, // all 1 left
		func() error { return watch(c) }, // all 0 left
		func() error { return watch(c) }, // denied by all
		func() error { return check(c) }, // denied by both
	} {
		got = append(got, status.Code(call()).String())
	}
	if g := strings.Join(got, " "); g != "OK ResourceExhausted OK OK ResourceExhausted ResourceExhausted" {
		t.Errorf("codes %s", g)
	}
	if g := s.String(); g != "true/true/0 true/true/1 true/true/0" {
		t.Errorf("handlers saw %s", g)
	}

	// A method no limit applies to passes untouched.
	i = New(newLimiter(t, "fixed-window 1/1m"), WithMethods("/other.Service/"))
	c, s = start(t, i)
	for range 3 {
		if err := check(c); err != nil {
			t.Fatal(err)
		}
	}
	if g := s.String(); g != "false/false/0 false/false/0 false/false/0" {
		t.Errorf("handlers saw %s", g)
	}
}

func TestApplies(t *testing.T) {
	for _, tc := range []struct {
		methods []string
		method  string
		want    bool
	}{
		{nil, checkMethod, true},
		{[]string{}, checkMethod, false},
		{[]string{checkMethod}, checkMethod, true},
		{[]string{checkMethod}, watchMethod, false},
		{[]string{service}, watchMethod, true},
		{[]string{"/grpc.health.v1.Health"}, watchMethod, false},
		{[]string{"/grpc.health.v1.Heal/"}, watchMethod, false},
	} {
		if got := applies(tc.methods, tc.method); got != tc.want {
			t.Errorf("applies(%q, %s) = %v", tc.methods, tc.method, got)
		}
	}
}

func TestKeys(t *testing.T) {
	ip := httplimit.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	ctxFrom := func(peerAddr net.Addr, md ...string) context.Context {
		ctx := context.Background()
		if peerAddr != nil {
			ctx = peer.NewContext(ctx, &peer.Peer{Addr: peerAddr})
		}
		return metadata.NewIncomingContext(ctx, metadata.Pairs(md...))
	}
	tcp := func(s string) net.Addr { return net.TCPAddrFromAddrPort(netip.MustParseAddrPort(s)) }
	for _, tc := range []struct {
		name  string
		f     KeyFunc
		ctx   context.Context
		want  string
		noKey bool
		err   error
	}{
		{"peer", ByPeer(httplimit.ClientIP{}), ctxFrom(tcp("192.0.2.1:5000")), "192.0.2.1", false, nil},
		{"peer IPv6 /64", ByPeer(httplimit.ClientIP{}), ctxFrom(tcp("[2001:db8:1:2::5]:5000")), "2001:db8:1:2::/64", false, nil},
		{"peer mapped", ByPeer(httplimit.ClientIP{}), ctxFrom(tcp("[::ffff:192.0.2.1]:5000")), "192.0.2.1", false, nil},
		{"spoofed metadata ignored", ByPeer(ip), ctxFrom(tcp("192.0.2.1:5000"), "x-forwarded-for", "203.0.113.9"), "192.0.2.1", false, nil},
		{"trusted proxy", ByPeer(ip), ctxFrom(tcp("10.0.0.2:5000"), "x-forwarded-for", "6.6.6.6, 203.0.113.9"), "203.0.113.9", false, nil},
		{"trusted proxy, Forwarded", ByPeer(httplimit.ClientIP{TrustedProxies: ip.TrustedProxies, Header: httplimit.Forwarded}),
			ctxFrom(tcp("10.0.0.2:5000"), "forwarded", `for="[2001:db8::7]:1"`), "2001:db8::/64", false, nil},
		{"trusted proxy, malformed", ByPeer(ip), ctxFrom(tcp("10.0.0.2:5000"), "x-forwarded-for", "6.6.6.6, junk"), "10.0.0.2", false, nil},
		{"no peer", ByPeer(httplimit.ClientIP{}), ctxFrom(nil), "", false, ErrNoPeerAddr},
		{"unix peer", ByPeer(httplimit.ClientIP{}), ctxFrom(&net.UnixAddr{Name: "/run/x.sock", Net: "unix"}), "", false, ErrNoPeerAddr},
		{"metadata", ByMetadata("X-Api-Key"), ctxFrom(nil, "x-api-key", "k1"), "k1", false, nil},
		{"metadata missing", ByMetadata("x-api-key"), ctxFrom(nil), "", true, nil},
		{"metadata too long", ByMetadata("x-api-key"), ctxFrom(nil, "x-api-key", strings.Repeat("k", 300)), "", true, nil},
		{"method", ByMethod, ctxFrom(nil), checkMethod, false, nil},
		{"global", Global, ctxFrom(nil), "*", false, nil},
		{"context", ByContext(userKey{}), context.WithValue(context.Background(), userKey{}, "alice"), "alice", false, nil},
		{"context missing", ByContext(userKey{}), context.Background(), "", true, nil},
		{"first of", FirstOf(ByMetadata("x-api-key"), ByPeer(httplimit.ClientIP{})), ctxFrom(tcp("192.0.2.1:5000")), "1:192.0.2.1", false, nil},
		{"first of none", FirstOf(ByMetadata("x-api-key")), ctxFrom(nil), "", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := tc.f(tc.ctx, checkMethod)
			switch {
			case tc.noKey:
				if !errors.Is(err, ErrNoKey) {
					t.Errorf("err %v, want ErrNoKey", err)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Errorf("err %v, want %v", err, tc.err)
				}
			case err != nil || k != tc.want:
				t.Errorf("key %q, %v; want %q", k, err, tc.want)
			}
		})
	}
}

type userKey struct{}

// TestTrustedProxyEndToEnd sends calls through a real connection from
// 127.0.0.1, trusted as a proxy: each forwarded client has its own limit.
func TestTrustedProxyEndToEnd(t *testing.T) {
	ip := httplimit.ClientIP{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	c, _ := start(t, New(newLimiter(t, "fixed-window 1/1m"), WithKey(ByPeer(ip))))
	for _, tc := range []struct {
		xff  string
		want codes.Code
	}{
		{"203.0.113.1", codes.OK},
		{"203.0.113.2", codes.OK},
		{"6.6.6.6, 203.0.113.1", codes.ResourceExhausted}, // a lie prepended changes nothing
		{"", codes.OK},                                    // no metadata: the peer, 127.0.0.1
		{"", codes.ResourceExhausted},
	} {
		var md []string
		if tc.xff != "" {
			md = []string{"x-forwarded-for", tc.xff}
		}
		if got := status.Code(check(c, md...)); got != tc.want {
			t.Errorf("x-forwarded-for %q: %v, want %v", tc.xff, got, tc.want)
		}
	}
}

func TestKeyErrorCodes(t *testing.T) {
	broken := errors.New("auth backend down")
	for _, tc := range []struct {
		name string
		key  KeyFunc
		want codes.Code
	}{
		{"no key", ByMetadata("x-api-key"), codes.InvalidArgument},
		{"broken", func(context.Context, string) (string, error) { return "", broken }, codes.Internal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := New(newLimiter(t, "fixed-window 5/1m"), WithKey(tc.key), WithLogger(slog.New(slog.DiscardHandler)))
			c, _ := start(t, i)
			err := check(c)
			if status.Code(err) != tc.want || strings.Contains(err.Error(), "backend") {
				t.Errorf("%v, want %v without the error's text", err, tc.want)
			}
			if i.Stats().KeyErrors != 1 {
				t.Errorf("Stats %+v", i.Stats())
			}
		})
	}
}

// brokenStore stands for a store whose server cannot be reached.
type brokenStore struct{}

var errBroken = errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")

func (brokenStore) Table(string, algo.Policy) (store.Table, error) {
	return brokenStore{}, nil
}
func (brokenStore) Apply(context.Context, []store.Op) error     { return errBroken }
func (brokenStore) ApplyEach(context.Context, []store.Op) error { return errBroken }
func (brokenStore) Decide(context.Context, string, int64, int64) (algo.Decision, error) {
	return algo.Decision{}, errBroken
}

func TestLimiterError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*clock.Fake) store.Store
		dry   bool
		code  codes.Code
		retry time.Duration
	}{
		{"no failsafe", func(*clock.Fake) store.Store { return brokenStore{} }, false, codes.Unavailable, time.Second},
		{"fail closed", func(fc *clock.Fake) store.Store {
			return newFailsafe(brokenStore{}, failsafe.Options{Threshold: 1, FailFor: -1, Cooldown: 5 * time.Second, Clock: fc})
		}, false, codes.Unavailable, 5 * time.Second},
		{"fail open", func(fc *clock.Fake) store.Store {
			return newFailsafe(brokenStore{}, failsafe.Options{Mode: failsafe.FailOpen, Threshold: 1, FailFor: -1, Clock: fc})
		}, false, codes.OK, -1},
		{"dry run", func(*clock.Fake) store.Store { return brokenStore{} }, true, codes.OK, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fc := clock.NewFake(t0)
			l := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 5/1m"), floodgate.WithStore(tc.store(fc)),
				floodgate.WithClock(fc), floodgate.WithDryRun(tc.dry)))
			var buf bytes.Buffer
			var mu sync.Mutex
			i := New(l, WithLogger(slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))))
			c, _ := start(t, i)
			err := check(c)
			if status.Code(err) != tc.code || retryDelay(err) != tc.retry {
				t.Fatalf("%v (RetryInfo %v), want %v with %v", err, retryDelay(err), tc.code, tc.retry)
			}
			if err != nil && strings.Contains(err.Error(), "refused") {
				t.Errorf("the store's error reached the client: %v", err)
			}
			mu.Lock()
			logged := strings.Contains(buf.String(), "connection refused")
			mu.Unlock()
			if wantLog := tc.code != codes.OK || tc.dry; logged != wantLog {
				t.Errorf("logged %v, want %v", logged, wantLog)
			}
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestDryRunSkipOnLimited(t *testing.T) {
	l := newLimiter(t, "fixed-window 1/1m", floodgate.WithDryRun(true))
	var mu sync.Mutex
	var limited []string
	i := New(l, WithLogger(slog.New(slog.DiscardHandler)),
		WithSkip(func(ctx context.Context, m string) bool {
			md, _ := metadata.FromIncomingContext(ctx)
			return len(md.Get("x-internal")) > 0
		}),
		WithOnLimited(func(ctx context.Context, m string, d floodgate.Decision) {
			mu.Lock()
			defer mu.Unlock()
			limited = append(limited, fmt.Sprintf("%s %v", m, d.DryRun))
		}))
	c, s := start(t, i)
	for range 3 {
		if err := check(c); err != nil {
			t.Fatal(err)
		}
	}
	if err := check(c, "x-internal", "1"); err != nil {
		t.Fatal(err)
	}
	if st := i.Stats(); st.DryRunDenied != 2 || st.Denied != 0 {
		t.Errorf("Stats %+v", st)
	}
	mu.Lock()
	if g := strings.Join(limited, ","); g != checkMethod+" true,"+checkMethod+" true" {
		t.Errorf("OnLimited %s", g)
	}
	mu.Unlock()
	if g := s.String(); g != "true/true/0 true/true/0 true/true/0 false/false/0" {
		t.Errorf("handlers saw %s", g)
	}
}

func TestCost(t *testing.T) {
	l := newLimiter(t, "fixed-window 10/1m")
	cost := func(_ context.Context, _ string, req any) int64 {
		if r, ok := req.(*healthpb.HealthCheckRequest); ok {
			return int64(len(r.Service))
		}
		return 1
	}
	c, _ := start(t, New(l, WithCostFunc(cost), WithLogger(slog.New(slog.DiscardHandler))))
	call := func(svc string) error {
		_, err := c.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		return err
	}
	// The health server answers NotFound for unknown services: the call
	// got through the limiter.
	if err := call("abcdef"); status.Code(err) != codes.NotFound {
		t.Fatalf("cost 6: %v", err)
	}
	if err := call("abcde"); status.Code(err) != codes.ResourceExhausted || retryDelay(err) != time.Minute {
		t.Fatalf("cost 5 over 4 left: %v", err)
	}
	err := call(strings.Repeat("x", 11))
	if status.Code(err) != codes.InvalidArgument || retryDelay(err) != -1 {
		t.Errorf("cost 11 over a burst of 10: %v (RetryInfo %v), want InvalidArgument, no RetryInfo", err, retryDelay(err))
	}
	if err := watch(c); err != nil { // a stream: nil request, cost 1
		t.Errorf("stream: %v", err)
	}
}

func TestNewPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"nil limiter": func() { New(nil) },
		"no limits":   func() { NewAll(nil) },
		"nil in all":  func() { NewAll([]Limit{{}}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// newFailsafe is failsafe.New with options that are right.
func newFailsafe(s store.Store, o failsafe.Options) *failsafe.Store {
	f, err := failsafe.New(s, o)
	if err != nil {
		panic(err)
	}
	return f
}
