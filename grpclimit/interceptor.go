package grpclimit

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/frontend"
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
	core         *frontend.Core[*call]
	limits       []limit
	quotaFailure bool
}

// call is a gRPC call as the front-end core sees it: ctx is the call's
// context, and once it is decided, the context carrying the decision.
type call struct {
	ctx    context.Context
	method string
	req    any // a unary call's request; nil for a stream
}

// limit is one limit of an Interceptor, ready to use.
type limit struct {
	frontend.Limit[*call]
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
	if !single && c.MaxWait > 0 {
		panic("grpclimit: WithDelay is for New: NewAll decides its limits all or nothing, without waiting")
	}
	if c.Key == nil {
		c.Key = defaults().Key
	}
	i := &Interceptor{core: frontend.NewCore(c.Config), quotaFailure: c.quotaFailure}
	taken := make(map[string]bool)
	for k, lc := range limits {
		if lc.Limiter == nil {
			panic("grpclimit: limit " + strconv.Itoa(k) + " has a nil Limiter")
		}
		name, methods := lc.Name, lc.Methods
		if single {
			methods = c.methods
			if c.Name != "" {
				name = c.Name
			}
		}
		name = frontend.LimitName(name, lc.Limiter, taken)
		lim := frontend.NewLimit(lc.Limiter, lc.Key.of(), lc.Cost.of(), name, &c.Config)
		i.limits = append(i.limits, limit{Limit: lim, methods: methods})
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
func (i *Interceptor) Stats() Stats { return Stats(i.core.Stats()) }

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
	frontend.Decided
	limits []*limit // the limits that applied, in the order of MD.Decisions
	lim    [1]*limit
}

// limit returns the k-th limit that applied, for the core.
func (dc *decisionContext) limit(k int) *frontend.Limit[*call] { return &dc.limits[k].Limit }

// check decides a call and returns its context, or the status error that
// ends it.
func (i *Interceptor) check(ctx context.Context, method string, req any) (context.Context, error) {
	c := &call{ctx: ctx, method: method, req: req}
	if i.core.Skipped(c) {
		return ctx, nil
	}
	dc := &decisionContext{}
	if dc.limits = i.applying(dc.lim[:0], method); len(dc.limits) == 0 {
		return ctx, nil
	}
	dc.Init(ctx, len(dc.limits))
	if err := i.core.Fill(&dc.Decided, dc.limit, c); err != nil {
		return nil, i.keyError(ctx, method, err)
	}
	c.ctx = dc
	// A dry-run limit's decision on a cost past its burst stands.
	if err := dc.Decide(i.core.MaxWait); err != nil && !(dc.MD.Allowed && errors.Is(err, algo.ErrCostExceedsBurst)) {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			i.core.Abandoned.Add(1) // cancelled while waiting its turn
			return nil, status.FromContextError(err).Err()
		}
		return i.failed(ctx, method, err, dc.MD.Allowed, dc.MD.RetryAfter)
	}
	if !dc.MD.Allowed {
		return nil, i.denied(dc, c)
	}
	for k := range dc.MD.Decisions {
		if dc.MD.Decisions[k].DryRun {
			i.dryRun(dc, c, k)
		}
	}
	return dc, nil
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

// failed ends a call whose limiters failed with err: when their failure
// mode admitted it anyway (allowed; dry-run mode) the call goes on with
// ctx, else it fails with limiterError's status, retry being the
// limiters' wait.
func (i *Interceptor) failed(ctx context.Context, method string, err error, allowed bool, retry time.Duration) (context.Context, error) {
	if allowed {
		i.core.ServedOnError.Add(1)
		i.logError(ctx, method, "grpclimit: limiter failed; call served", err)
		return ctx, nil
	}
	return nil, i.limiterError(ctx, method, err, retry)
}

// denied counts a denied call, reports it to the WithOnLimited function,
// and returns its status.
func (i *Interceptor) denied(dc *decisionContext, c *call) error {
	i.core.Denials.Add(1)
	if i.core.OnLimited != nil {
		i.core.OnLimited(c, dc.Bound())
	}
	return i.denial(dc)
}

// denial returns the status of a denied call.
func (i *Interceptor) denial(dc *decisionContext) error {
	md := &dc.MD
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
					Subject:     "limit:" + lim.Name,
					Description: lim.Limiter.Policy().String() + " exceeded",
					QuotaId:     lim.Name,
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
func (i *Interceptor) dryRun(dc *decisionContext, c *call, k int) {
	i.core.DryRunDenied.Add(1)
	d := dc.MD.Decisions[k]
	if log := i.core.Log; log.Enabled(dc, slog.LevelInfo) {
		log.LogAttrs(dc, slog.LevelInfo, "grpclimit: dry run: call over the limit, served",
			slog.String("limit", dc.limits[k].Name), slog.String("key", dc.Checks[k].Key),
			slog.String("method", c.method), slog.Duration("retry_after", d.RetryAfter))
	}
	if i.core.OnLimited != nil {
		i.core.OnLimited(c, d)
	}
}

// keyError returns the status of a call whose key could not be found.
func (i *Interceptor) keyError(ctx context.Context, method string, err error) error {
	i.core.KeyErrors.Add(1)
	if errors.Is(err, ErrNoKey) || errors.Is(err, store.ErrInvalidKey) {
		return status.Error(codes.InvalidArgument, "the call does not say who is making it, so it cannot be rate-limited")
	}
	i.logError(ctx, method, "grpclimit: key function failed", err)
	return status.Error(codes.Internal, "the server could not rate-limit this call")
}

// limiterError returns the status of a call whose limiter failed and did
// not admit it.
func (i *Interceptor) limiterError(ctx context.Context, method string, err error, retry time.Duration) error {
	i.core.Failures.Add(1)
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

// logError logs err at level Error, at most once a second.
func (i *Interceptor) logError(ctx context.Context, method, msg string, err error) {
	i.core.LogError(ctx, msg, err, slog.String("method", method))
}

// DecisionFrom returns the decision of the limit that binds on the call
// whose context is ctx: the limit that denied, or the one with the least
// remaining. It reports false for a call the interceptor did not decide.
func DecisionFrom(ctx context.Context) (floodgate.Decision, bool) {
	dc, ok := frontend.From(ctx)
	if !ok {
		return floodgate.Decision{}, false
	}
	return dc.Bound(), true
}
