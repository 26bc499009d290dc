package grpclimit

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/logthrottle"
	"github.com/floodgate/floodgate/internal/seconds"
	"github.com/floodgate/floodgate/store"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Interceptor limits the rate of the calls a gRPC server serves: one limit
// (New) or several checked all or nothing (NewAll), each on every method
// or on some (Limit.Methods, WithMethods). Install both of its
// interceptors:
//
//	grpc.NewServer(
//		grpc.ChainUnaryInterceptor(i.Unary()),
//		grpc.ChainStreamInterceptor(i.Stream()))
//
// A unary call is decided before its handler runs; a stream once, when it
// opens, at the cost given by the CostFunc with a nil request.
//
// With WithDelay, a call over the rate first waits its turn, on the
// handler's goroutine, up to the maximum delay; one cancelled while it
// waits fails with its context's status (codes.Canceled or
// codes.DeadlineExceeded), gives its units back as
// floodgate.Reservation.Cancel does, and is counted in Stats().Abandoned.
//
// A denied call fails with codes.ResourceExhausted, and its status carries
// an errdetails.RetryInfo whose RetryDelay is the exact wait after which
// the call would be admitted, and with WithQuotaFailure an
// errdetails.QuotaFailure naming the limits that denied. An admitted
// call's context carries the decision (DecisionFrom).
//
// When the interceptor cannot decide:
//   - a key function's error wrapping ErrNoKey, or a key the store refuses
//     (store.ErrInvalidKey): codes.InvalidArgument;
//   - any other key function's error, and a negative cost: codes.Internal;
//   - a cost above a limit's burst, which no wait would admit:
//     codes.InvalidArgument, without RetryInfo (not logged: the client
//     can fix it);
//   - a limiter's error: its failure mode (package failsafe) decides. If
//     it admits with an error (dry-run mode), the call goes through; if it
//     denies with one (FailClosed, or no failsafe), the call fails with
//     codes.Unavailable, with a RetryInfo of the time until the store is
//     tried again (1 second if unknown).
//
// Error messages are generic: the errors themselves are logged, at most one
// line a second (WithLogger), and counted (Stats), never sent to the
// client.
//
// An Interceptor is safe for concurrent use.
type Interceptor struct {
	limits       []limit
	defKey       KeyFunc
	skips        []func(context.Context, string) bool
	quotaFailure bool
	onLimited    func(context.Context, string, floodgate.Decision)
	log          *slog.Logger
	maxWait      time.Duration // WithDelay's; 0: refuse at once

	denials                           counter
	dryRunDenied, keyErrors, failures counter
	servedOnError, abandoned          counter
	logs                              logthrottle.Throttle // one error line a second
}

type counter struct {
	atomic.Uint64
	_ [56]byte
}

type limit struct {
	l       *floodgate.Limiter
	key     KeyFunc  // nil: the interceptor's
	cost    CostFunc // nil: 1
	name    string
	methods []string // nil: all
}

// Limit is one of the limits of NewAll.
type Limit struct {
	// Limiter decides; it must not be nil.
	Limiter *floodgate.Limiter
	// Key keys calls for this limit; nil means the interceptor's (WithKey,
	// by default the peer's address).
	Key KeyFunc
	// Cost is the cost of a call for this limit; nil means the
	// interceptor's (WithCostFunc, by default 1).
	Cost CostFunc
	// Methods are the methods this limit applies to: full method names
	// ("/pkg.Service/Method") or services ending in a slash
	// ("/pkg.Service/"). Nil means every method.
	Methods []string
	// Name names the limit in QuotaFailure details and logs; by default
	// the limiter's name, or "default".
	Name string
}

// New returns an Interceptor limiting calls with l, configured by opts: by
// default each call costs 1 on the key of the peer's address. It panics if
// l is nil.
func New(l *floodgate.Limiter, opts ...Option) *Interceptor {
	return newInterceptor([]Limit{{Limiter: l}}, opts, true)
}

// NewAll returns an Interceptor checking, on each call, the limits that
// apply to its method, all or nothing (floodgate.AllowAll): a call is
// admitted only if every one of them admits it, and only then does each
// spend its units. A call to a method no limit applies to goes through
// untouched. It panics if limits is empty or a Limiter is nil.
func NewAll(limits []Limit, opts ...Option) *Interceptor {
	return newInterceptor(limits, opts, false)
}

func newInterceptor(limits []Limit, opts []Option, single bool) *Interceptor {
	if len(limits) == 0 {
		panic("grpclimit: NewAll with no limit")
	}
	c := defaults()
	for _, o := range opts {
		o.apply(&c)
	}
	if !single && c.maxWait > 0 {
		panic("grpclimit: WithDelay is for New: NewAll decides its limits all or nothing, without waiting")
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	i := &Interceptor{defKey: c.key, skips: c.skips, quotaFailure: c.quotaFailure, onLimited: c.onLimited, log: c.log, maxWait: c.maxWait}
	if i.defKey == nil {
		i.defKey = defaults().key
	}
	for k, lc := range limits {
		if lc.Limiter == nil {
			panic("grpclimit: limit " + strconv.Itoa(k) + " has a nil Limiter")
		}
		lim := limit{l: lc.Limiter, key: lc.Key, cost: lc.Cost, name: lc.Name, methods: lc.Methods}
		if lc.Cost == nil {
			lim.cost = c.cost
		}
		if single {
			lim.methods = c.methods
		}
		if lim.name == "" {
			lim.name = lc.Limiter.Name()
			if lim.name == lc.Limiter.Policy().String() {
				lim.name = "default"
			}
		}
		i.limits = append(i.limits, lim)
	}
	return i
}

// Unary returns the interceptor for unary calls.
func (i *Interceptor) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := i.check(ctx, info.FullMethod, req)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// Stream returns the interceptor for streams.
func (i *Interceptor) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := i.check(ss.Context(), info.FullMethod, nil)
		if err != nil {
			return err
		}
		if ctx != ss.Context() {
			ss = &stream{ServerStream: ss, ctx: ctx}
		}
		return handler(srv, ss)
	}
}

// stream is a ServerStream whose context carries the decision.
type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *stream) Context() context.Context { return s.ctx }

// Stats counts what an Interceptor did since it was made.
type Stats struct {
	Denied        uint64 // calls denied (ResourceExhausted)
	DryRunDenied  uint64 // calls a dry-run limiter would have denied, served
	KeyErrors     uint64 // calls refused because no key could be found
	Errors        uint64 // calls refused because a limiter failed, or whose cost exceeds a burst
	ServedOnError uint64 // calls served although their limiter failed
	Abandoned     uint64 // calls cancelled while they waited their turn (WithDelay)
}

// Stats returns the interceptor's counts.
func (i *Interceptor) Stats() Stats {
	return Stats{
		Denied:        i.denials.Load(),
		DryRunDenied:  i.dryRunDenied.Load(),
		KeyErrors:     i.keyErrors.Load(),
		Errors:        i.failures.Load(),
		ServedOnError: i.servedOnError.Load(),
		Abandoned:     i.abandoned.Load(),
	}
}

// applies reports whether a limit on methods applies to fullMethod.
func applies(methods []string, fullMethod string) bool {
	if methods == nil {
		return true
	}
	for _, m := range methods {
		if m == fullMethod || strings.HasSuffix(m, "/") && strings.HasPrefix(fullMethod, m) {
			return true
		}
	}
	return false
}

// decisionContext is the context of a decided call.
type decisionContext struct {
	context.Context
	md      floodgate.MultiDecision
	limits  []*limit // the limits that applied, in the order of md.Decisions
	checks  []floodgate.Check
	binding int
	one     [1]floodgate.Decision
	lim     [1]*limit
	check   [1]floodgate.Check
}

type decisionKey struct{}

func (c *decisionContext) Value(key any) any {
	if _, ok := key.(decisionKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// check decides a call and returns its context, or the status error that
// ends it.
func (i *Interceptor) check(ctx context.Context, method string, req any) (context.Context, error) {
	if i.skipped(ctx, method) {
		return ctx, nil
	}
	dc := &decisionContext{Context: ctx}
	if dc.limits = i.applying(dc.lim[:0], method); len(dc.limits) == 0 {
		return ctx, nil
	}
	if err := i.checks(dc, method, req); err != nil {
		return nil, err
	}
	// A dry-run limit's decision on a cost past its burst stands.
	if err := dc.decide(i.maxWait); err != nil && !(dc.md.Allowed && errors.Is(err, algo.ErrCostExceedsBurst)) {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			i.abandoned.Add(1) // cancelled while waiting its turn
			return nil, status.FromContextError(err).Err()
		}
		return i.failed(ctx, method, err, dc.md.Allowed, dc.md.RetryAfter)
	}
	dc.binding = binding(&dc.md)
	if !dc.md.Allowed {
		return nil, i.denied(dc, method)
	}
	for k := range dc.md.Decisions {
		if dc.md.Decisions[k].DryRun {
			i.dryRun(dc, method, k)
		}
	}
	return dc, nil
}

// skipped reports whether one of the skip functions (WithSkip) exempts
// the call.
func (i *Interceptor) skipped(ctx context.Context, method string) bool {
	for _, skip := range i.skips {
		if skip(ctx, method) {
			return true
		}
	}
	return false
}

// applying appends to dst the limits that apply to method, in their
// order, and returns the extended slice.
func (i *Interceptor) applying(dst []*limit, method string) []*limit {
	for k := range i.limits {
		if applies(i.limits[k].methods, method) {
			dst = append(dst, &i.limits[k])
		}
	}
	return dst
}

// checks sets dc.checks, one for each limit in dc.limits: its limiter,
// the call's key (the limit's key function, else the interceptor's,
// called at most once for all the limits that use it) and the call's cost
// (the limit's cost function, else 1). It returns the status of a call
// whose key cannot be found.
func (i *Interceptor) checks(dc *decisionContext, method string, req any) error {
	if len(dc.limits) == 1 {
		dc.checks = dc.check[:]
	} else {
		dc.checks = make([]floodgate.Check, len(dc.limits))
	}
	var def defaultKey
	for k, lim := range dc.limits {
		var key string
		var err error
		if lim.key != nil {
			key, err = lim.key(dc.Context, method)
		} else {
			key, err = def.get(dc.Context, i.defKey, method)
		}
		if err != nil {
			return i.keyError(dc.Context, method, err)
		}
		n := int64(1)
		if lim.cost != nil {
			n = lim.cost(dc.Context, method, req)
		}
		dc.checks[k] = floodgate.Check{Limiter: lim.l, Key: key, N: n, Peek: n == 0}
	}
	return nil
}

// defaultKey is a call's key by the interceptor's key function, found
// once for all the limits without their own. Its zero value has not yet
// called it.
type defaultKey struct {
	key  string
	err  error
	done bool
}

// get returns the key f finds for the call, calling f the first time.
func (d *defaultKey) get(ctx context.Context, f KeyFunc, method string) (string, error) {
	if !d.done {
		d.key, d.err = f(ctx, method)
		d.done = true
	}
	return d.key, d.err
}

// decide decides dc.checks into dc.md: a single limit by its Delay
// (which is AllowN when maxWait is 0), into dc's own storage, several all or
// nothing by floodgate.AllowAll. It returns the limiters' error, dc.md
// set even then.
func (dc *decisionContext) decide(maxWait time.Duration) error {
	if len(dc.checks) != 1 {
		var err error
		dc.md, err = floodgate.AllowAll(dc.Context, dc.checks...)
		return err
	}
	c := dc.checks[0]
	d, err := c.Limiter.Delay(dc.Context, c.Key, c.N, maxWait)
	dc.one[0] = d
	dc.md = floodgate.MultiDecision{Allowed: d.Allowed, Denied: -1, Decisions: dc.one[:]}
	if !d.Allowed {
		dc.md.RetryAfter, dc.md.Denied = d.RetryAfter, 0
	}
	return err
}

// failed ends a call whose limiters failed with err: when their failure
// mode admitted it anyway (allowed; dry-run mode) the call goes on with
// ctx, else it fails with limiterError's status, retry being the
// limiters' wait.
func (i *Interceptor) failed(ctx context.Context, method string, err error, allowed bool, retry time.Duration) (context.Context, error) {
	if allowed {
		i.servedOnError.Add(1)
		i.logError(ctx, method, "grpclimit: limiter failed; call served", err)
		return ctx, nil
	}
	return nil, i.limiterError(ctx, method, err, retry)
}

// denied counts a denied call, reports it to the WithOnLimited function,
// and returns its status.
func (i *Interceptor) denied(dc *decisionContext, method string) error {
	i.denials.Add(1)
	if i.onLimited != nil {
		i.onLimited(dc, method, dc.md.Decisions[dc.binding])
	}
	return i.denial(dc)
}

// binding returns the index of the limit that binds: the one that denied
// with the longest wait, else the one with the least remaining.
func binding(md *floodgate.MultiDecision) int {
	if !md.Allowed && md.Denied >= 0 {
		return md.Denied
	}
	b := 0
	for k := 1; k < len(md.Decisions); k++ {
		if md.Decisions[k].Remaining < md.Decisions[b].Remaining {
			b = k
		}
	}
	return b
}

// denial returns the status of a denied call.
func (i *Interceptor) denial(dc *decisionContext) error {
	md := &dc.md
	var msg string
	if md.RetryAfter == algo.Never {
		msg = "rate limit exceeded: the call costs more than the limit allows at once"
	} else {
		msg = "rate limit exceeded: retry in " + strconv.FormatInt(max(seconds.Ceil(md.RetryAfter), 1), 10) + "s"
	}
	st := status.New(codes.ResourceExhausted, msg)
	var details []protoadapt.MessageV1
	if md.RetryAfter != algo.Never {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(md.RetryAfter)})
	}
	if i.quotaFailure {
		qf := &errdetails.QuotaFailure{}
		for k, d := range md.Decisions {
			if !d.Allowed && !d.Policy().IsZero() { // not a dry-run limit left undecided
				lim := dc.limits[k]
				qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
					Subject:     "limit:" + lim.name,
					Description: lim.l.Policy().String() + " exceeded",
					QuotaId:     lim.name,
				})
			}
		}
		details = append(details, qf)
	}
	if ds, err := st.WithDetails(details...); err == nil {
		st = ds
	}
	return st.Err()
}

// dryRun records that limit k, in dry-run mode, would have denied a call.
func (i *Interceptor) dryRun(dc *decisionContext, method string, k int) {
	i.dryRunDenied.Add(1)
	d := dc.md.Decisions[k]
	if i.log.Enabled(dc, slog.LevelInfo) {
		i.log.LogAttrs(dc, slog.LevelInfo, "grpclimit: dry run: call over the limit, served",
			slog.String("limit", dc.limits[k].name), slog.String("key", dc.checks[k].Key),
			slog.String("method", method), slog.Duration("retry_after", d.RetryAfter))
	}
	if i.onLimited != nil {
		i.onLimited(dc, method, d)
	}
}

// keyError returns the status of a call whose key could not be found.
func (i *Interceptor) keyError(ctx context.Context, method string, err error) error {
	i.keyErrors.Add(1)
	if errors.Is(err, ErrNoKey) || errors.Is(err, store.ErrInvalidKey) {
		return status.Error(codes.InvalidArgument, "the call does not say who is making it, so it cannot be rate-limited")
	}
	i.logError(ctx, method, "grpclimit: key function failed", err)
	return status.Error(codes.Internal, "the server could not rate-limit this call")
}

// limiterError returns the status of a call whose limiter failed and did
// not admit it.
func (i *Interceptor) limiterError(ctx context.Context, method string, err error, retry time.Duration) error {
	i.failures.Add(1)
	tooCostly := errors.Is(err, algo.ErrCostExceedsBurst)
	if !tooCostly { // the client's doing, not a failure to log
		i.logError(ctx, method, "grpclimit: limiter failed; call refused", err)
	}
	switch {
	case tooCostly:
		return status.Error(codes.InvalidArgument, "the call costs more than the rate limit allows at once: it can never be admitted")
	case errors.Is(err, store.ErrInvalidKey):
		return status.Error(codes.InvalidArgument, "the call does not say who is making it, so it cannot be rate-limited")
	case errors.Is(err, algo.ErrInvalidCost):
		return status.Error(codes.Internal, "the server could not rate-limit this call")
	}
	if retry <= 0 || retry == algo.Never {
		retry = time.Second
	}
	st := status.New(codes.Unavailable, "the rate limiter is unavailable: retry later")
	if ds, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}); err == nil {
		st = ds
	}
	return st.Err()
}

// logError logs err at level Error, at most once a second; the line counts
// the errors not logged since the last.
func (i *Interceptor) logError(ctx context.Context, method, msg string, err error) {
	unlogged, ok := i.logs.Allow()
	if !ok {
		return
	}
	i.log.LogAttrs(ctx, slog.LevelError, msg, slog.String("error", err.Error()),
		slog.String("method", method), slog.Uint64("unlogged", unlogged))
}

// DecisionFrom returns the decision of the limit that binds on the call
// whose context is ctx: the limit that denied, or the one with the least
// remaining. It reports false for a call the interceptor did not decide.
func DecisionFrom(ctx context.Context) (floodgate.Decision, bool) {
	dc, ok := ctx.Value(decisionKey{}).(*decisionContext)
	if !ok {
		return floodgate.Decision{}, false
	}
	return dc.md.Decisions[dc.binding], true
}
