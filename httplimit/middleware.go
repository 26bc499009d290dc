package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/frontend"
	"github.com/floodgate/floodgate/internal/ratelimitfields"
	"github.com/floodgate/floodgate/store"
)

// Middleware limits the rate of the requests that reach a handler: one
// limit (New) or several at once, all or nothing (NewAll). Wrap handlers
// with its Handler method, per route or globally:
//
//	mux.Handle("/api/", m.Handler(api))
//	srv := &http.Server{Handler: m.Handler(mux)}
//
// Each request goes through these steps:
//
//  1. If a WithSkip function says so, the request is served as is.
//  2. The key function of each limit names the request's key (by default
//     its client address, ClientIP{}.Key); its cost is 1 unless WithCost
//     or WithCostFunc says otherwise.
//  3. The limiter decides (with WithDelay, once the request has waited
//     its turn: see "Shaping" in the package doc). Admitted, the request
//     goes on to the handler, with the RateLimit-Policy and RateLimit
//     header fields already set, and the decision in its context
//     (DecisionFrom). Denied, it gets the
//     same fields, Retry-After (in whole seconds, rounded up), and a 429
//     whose body is an RFC 9457 problem detail (application/problem+json)
//     if the client accepts JSON, a line of text otherwise; WithStatus,
//     WithDeniedBody and WithDeniedHandler change that.
//
// The middleware sets every header before it calls the next handler, and
// passes on the http.ResponseWriter it was given, unwrapped: streaming,
// http.Flusher, http.Hijacker and http.ResponseController work as if it
// were not there.
//
// # When the middleware cannot decide
//
// These are answered by the handler of WithErrorHandler if there is one,
// else as follows:
//   - A key function's error wrapping ErrNoKey (no such header, cookie or
//     context value), or a store refusing the key
//     (store.ErrInvalidKey): 400 Bad Request. The client can fix it.
//   - Any other key function's error, and a negative cost: 500 Internal
//     Server Error, logged.
//   - A cost above a limit's burst, which no wait would admit: 413
//     Content Too Large, without Retry-After or rate-limit fields; the
//     error wraps algo.ErrCostExceedsBurst. Not logged: the client can
//     fix it (a smaller body, a cheaper query).
//   - A limiter's error (its store failing): what the limiter decided
//     stands, and its failure mode decides that (package failsafe). A
//     store in FailOpen or FailLocal mode keeps deciding, without errors,
//     and the middleware sees ordinary decisions. A limiter that admits
//     with an error (one in dry-run mode) has the request served, without
//     rate-limit fields. A limiter that denies with an error (FailClosed's
//     failsafe.ErrUnavailable, or a store with no failsafe) gets 503 Service
//     Unavailable, with Retry-After: the time until the store is tried
//     again, or 1 second if the limiter does not say. It is logged.
//
// A request whose client goes away while it waits its turn (WithDelay)
// gets no answer: its units are given back as Reservation.Cancel does, and
// it is counted in Stats().Abandoned. Over HTTP/1.x, net/http sees the
// client go only once the body is read; so the middleware reads a body of
// up to 64 KiB ahead while the request waits (see "Shaping" in the
// package doc).
//
// The errors themselves never reach the client: only the status and a
// generic message do. Errors are logged (WithLogger) at most one line a
// second, and counted (Stats).
//
// # Dry run
//
// A limiter made with floodgate.WithDryRun(true) denies nothing: a request
// it would have denied is served, counted in Stats().DryRunDenied, logged
// at level Info, and passed to the WithOnLimited function with
// Decision.DryRun set. A dry-run limit is not advertised: it is in
// neither RateLimit-Policy nor RateLimit (nor the X-RateLimit fields),
// since clients would slow down for a limit that is not enforced.
//
// A Middleware is safe for concurrent use.
type Middleware struct {
	core        *frontend.Core[*http.Request]
	limits      []limit
	limitAt     func(int) *frontend.Limit[*http.Request] // &limits[i].Limit, for core.Fill
	status      int
	body        []byte
	bodyType    string
	denied      http.Handler
	onError     func(http.ResponseWriter, *http.Request, error)
	headers     Headers
	policyField string // the RateLimit-Policy field, the same for every request
}

// limit is one limit of a Middleware, ready to use, with its forms in
// responses.
type limit struct {
	frontend.Limit[*http.Request]
	sfName    string // name as a structured-field String
	jsonName  string // name as a JSON string
	quotaText string // q, for X-RateLimit-Limit
}

// Limit is one of the limits of NewAll.
type Limit struct {
	// Limiter decides; it must not be nil.
	Limiter *floodgate.Limiter
	// Key keys requests for this limit; nil means the middleware's key
	// (WithKey, by default the client address).
	Key KeyFunc
	// Cost is the cost of a request for this limit; nil means the
	// middleware's (WithCost or WithCostFunc, by default 1).
	Cost func(*http.Request) int64
	// Name names the limit in the header fields. By default it is the
	// limiter's name (floodgate.WithName), or "default" if it has none; a
	// name already taken gets a suffix, "-2", "-3" and so on.
	Name string
	// Unit is the quota unit advertised in RateLimit-Policy (qu): "" means
	// the middleware's (WithQuotaUnit), by default requests.
	Unit string
}

// New returns a Middleware limiting requests with l, configured by opts:
// by default each request costs 1 on the key of its client address, and a
// denial is a 429. It panics if l is nil.
func New(l *floodgate.Limiter, opts ...Option) *Middleware {
	return newMiddleware([]Limit{{Limiter: l}}, opts, true)
}

// NewAll returns a Middleware checking several limits on each request, all
// or nothing (floodgate.AllowAll): a per-user and a global limit, a
// request count and a byte count. A request is admitted only if every
// limit admits it, and only then does each spend its units. The header
// fields list every limit, in order; a denial's Retry-After is the longest
// wait among the limits that denied. It panics if limits is empty or a
// Limiter is nil.
func NewAll(limits []Limit, opts ...Option) *Middleware {
	return newMiddleware(limits, opts, false)
}

func newMiddleware(limits []Limit, opts []Option, single bool) *Middleware {
	if len(limits) == 0 {
		panic("httplimit: NewAll with no limit")
	}
	c := defaults()
	for _, o := range opts {
		o.apply(&c)
	}
	if !single && c.MaxWait > 0 {
		panic("httplimit: WithDelay is for New: NewAll decides its limits all or nothing, without waiting")
	}
	if c.Key == nil {
		c.Key = ClientIP{}.Key
	}
	m := &Middleware{
		core: frontend.NewCore(c.Config), status: c.status, body: c.body, bodyType: c.bodyType,
		denied: c.denied, onError: c.onError, headers: c.headers,
	}
	m.limitAt = func(i int) *frontend.Limit[*http.Request] { return &m.limits[i].Limit }
	taken := make(map[string]bool)
	var policy []string
	for i, lc := range limits {
		if lc.Limiter == nil {
			panic("httplimit: limit " + strconv.Itoa(i) + " has a nil Limiter")
		}
		name := lc.Name
		if single && c.Name != "" {
			name = c.Name
		}
		lim := newLimit(lc, &c, frontend.LimitName(name, lc.Limiter, taken))
		if !lim.DryRun {
			policy = append(policy, lim.policyItem(lc, &c))
		}
		m.limits = append(m.limits, lim)
	}
	m.policyField = strings.Join(policy, ", ")
	return m
}

// newLimit is lc as the middleware keeps it, named name, with the
// options' key and cost when lc has none.
func newLimit(lc Limit, c *config, name string) limit {
	lim := limit{Limit: frontend.NewLimit(lc.Limiter, lc.Key, lc.Cost, name, &c.Config)}
	lim.sfName = ratelimitfields.String(name)
	jn, _ := json.Marshal(ratelimitfields.Name(name))
	lim.jsonName = string(jn)
	q, _ := ratelimitfields.QuotaWindow(lc.Limiter.Policy())
	lim.quotaText = strconv.FormatInt(q, 10)
	return lim
}

// policyItem is the limit's item of the RateLimit-Policy field:
// "NAME;q=QUOTA;w=WINDOW", and ";qu=UNIT" for a unit other than requests.
func (lim *limit) policyItem(lc Limit, c *config) string {
	q, w := ratelimitfields.QuotaWindow(lc.Limiter.Policy())
	item := string(ratelimitfields.AppendPolicy(nil, lim.sfName, q, w))
	unit := lc.Unit
	if unit == "" {
		unit = c.unit
	}
	if unit != "" && unit != "requests" {
		item += ";qu=" + ratelimitfields.String(unit)
	}
	return item
}

// Handler returns next wrapped by the middleware: a
// func(http.Handler) http.Handler, for routers' Use methods. It panics if
// next is nil.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	if next == nil {
		panic("httplimit: Handler of a nil http.Handler")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

// Stats counts what a Middleware did since it was made.
type Stats struct {
	// Denied counts the requests denied.
	Denied uint64
	// DryRunDenied counts the requests that a limiter in dry-run mode
	// would have denied, served.
	DryRunDenied uint64
	// KeyErrors counts the requests refused because their key could not
	// be found: 400 or 500.
	KeyErrors uint64
	// Errors counts the requests refused because a limiter failed: 503,
	// or 500 for a negative cost, 413 for a cost above a limit's burst,
	// 400 for a key the store refused.
	Errors uint64
	// ServedOnError counts the requests served although their limiter
	// failed (it admitted them with an error, as a dry-run limiter does).
	ServedOnError uint64
	// Abandoned counts the requests whose client went away (their context
	// was cancelled) while they waited their turn (WithDelay); their units
	// were given back, and nothing was written.
	Abandoned uint64
}

// Stats returns the middleware's counts.
func (m *Middleware) Stats() Stats { return Stats(m.core.Stats()) }

// decisionContext is the context of a decided request: it carries the
// decision for DecisionFrom and holds, in one allocation, what a
// one-limit request needs.
type decisionContext struct {
	frontend.Decided
	fields [2]string // the header fields' slices
}

// serve is the middleware's handler.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if m.core.Skipped(r) {
		next.ServeHTTP(w, r)
		return
	}
	dc := &decisionContext{}
	dc.Init(r.Context(), len(m.limits))
	keyErr, err := m.decide(r, dc)
	if err != nil && m.undecided(w, r, next, dc, keyErr, err) {
		return
	}
	md := &dc.MD
	h := w.Header()
	if m.headers != NoHeaders {
		m.writeFields(h, md, dc.Checks, dc.Binding, &dc.fields)
	}
	r = r.WithContext(dc)
	if md.Allowed {
		for i := range md.Decisions {
			if md.Decisions[i].DryRun {
				m.dryRun(r, &dc.Decided, i)
			}
		}
		next.ServeHTTP(w, r)
		return
	}
	m.core.Denials.Add(1)
	setRetryAfter(h, md.RetryAfter)
	if m.core.OnLimited != nil {
		m.core.OnLimited(r, dc.Bound())
	}
	if m.denied != nil {
		m.denied.ServeHTTP(w, r)
		return
	}
	m.deny(w, r, md)
}

// decide decides a request on the middleware's limits. It returns a key
// function's error, with keyErr set, or the limiters'.
func (m *Middleware) decide(r *http.Request, dc *decisionContext) (keyErr bool, err error) {
	if err := m.core.Fill(&dc.Decided, m.limitAt, r); err != nil {
		return true, err
	}
	if m.core.MaxWait > 0 {
		watchDisconnect(r)
	}
	return false, dc.Decide(m.core.MaxWait)
}

// undecided answers a request whose decision failed with err, and
// reports whether it did; it did not for a dry-run limit's decision on a
// cost above its burst, which stands.
func (m *Middleware) undecided(w http.ResponseWriter, r *http.Request, next http.Handler, dc *decisionContext, keyErr bool, err error) bool {
	switch {
	case keyErr:
		m.keyError(w, r, err)
	case r.Context().Err() != nil && errors.Is(err, r.Context().Err()):
		m.core.Abandoned.Add(1) // gone while waiting: no one to answer
	case dc.MD.Allowed && errors.Is(err, algo.ErrCostExceedsBurst):
		return false // a dry-run limit's decision
	case dc.MD.Allowed:
		m.core.ServedOnError.Add(1)
		m.logError(r, "httplimit: limiter failed; request served", err)
		next.ServeHTTP(w, r)
	default:
		m.limiterError(w, r, err, dc.MD.RetryAfter)
	}
	return true
}

// dryRun records that limit i, in dry-run mode, would have denied r.
func (m *Middleware) dryRun(r *http.Request, dc *frontend.Decided, i int) {
	m.core.DryRunDenied.Add(1)
	d := dc.MD.Decisions[i]
	if log := m.core.Log; log.Enabled(r.Context(), slog.LevelInfo) {
		log.LogAttrs(r.Context(), slog.LevelInfo, "httplimit: dry run: request over the limit, served",
			slog.String("limit", m.limits[i].Name), slog.String("key", dc.Checks[i].Key),
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Duration("retry_after", d.RetryAfter))
	}
	if m.core.OnLimited != nil {
		m.core.OnLimited(r, d)
	}
}

// keyError answers a request whose key could not be found.
func (m *Middleware) keyError(w http.ResponseWriter, r *http.Request, err error) {
	m.core.KeyErrors.Add(1)
	status := http.StatusBadRequest
	if !errors.Is(err, ErrNoKey) && !errors.Is(err, store.ErrInvalidKey) {
		status = http.StatusInternalServerError
		m.logError(r, "httplimit: key function failed", err)
	}
	if m.onError != nil {
		m.onError(w, r, err)
		return
	}
	if status == http.StatusBadRequest {
		problem(w, r, status, "The request does not say who is making it, so it cannot be rate-limited.")
		return
	}
	problem(w, r, status, "The server could not rate-limit this request.")
}

// limiterError answers a request whose limiter failed and did not admit
// it; retry is the limiter's RetryAfter.
func (m *Middleware) limiterError(w http.ResponseWriter, r *http.Request, err error, retry time.Duration) {
	m.core.Failures.Add(1)
	tooCostly := errors.Is(err, algo.ErrCostExceedsBurst)
	if !tooCostly { // the client's doing, not a failure to log
		m.logError(r, "httplimit: limiter failed; request refused", err)
	}
	if m.onError != nil {
		m.onError(w, r, err)
		return
	}
	switch {
	case tooCostly:
		problem(w, r, http.StatusRequestEntityTooLarge, "This request costs more than the rate limit allows at once: it can never be admitted.")
	case errors.Is(err, store.ErrInvalidKey):
		problem(w, r, http.StatusBadRequest, "The request does not say who is making it, so it cannot be rate-limited.")
	case errors.Is(err, algo.ErrInvalidCost):
		problem(w, r, http.StatusInternalServerError, "The server could not rate-limit this request.")
	default:
		if retry <= 0 || retry == algo.Never {
			retry = retryAfterOnError
		}
		setRetryAfter(w.Header(), retry)
		problem(w, r, http.StatusServiceUnavailable, "The rate limiter is unavailable: retry later.")
	}
}

// logError logs err at level Error, at most once a second.
func (m *Middleware) logError(r *http.Request, msg string, err error) {
	m.core.LogError(r.Context(), msg, err, slog.String("method", r.Method), slog.String("path", r.URL.Path))
}

// DecisionFrom returns the decision of the limit that binds on the request
// whose context is ctx: the limit that denied it, or the one with the
// least remaining. It reports false for a context the middleware did not
// decide (a skipped request, one whose limiter failed).
func DecisionFrom(ctx context.Context) (floodgate.Decision, bool) {
	dc, ok := frontend.From(ctx)
	if !ok {
		return floodgate.Decision{}, false
	}
	return dc.Bound(), true
}

// MultiDecisionFrom returns the decisions of every limit on the request
// whose context is ctx, in the order of the limits (one for New). The
// caller must not modify its Decisions. It reports false as DecisionFrom
// does.
func MultiDecisionFrom(ctx context.Context) (floodgate.MultiDecision, bool) {
	dc, ok := frontend.From(ctx)
	if !ok {
		return floodgate.MultiDecision{}, false
	}
	return dc.MD, true
}
