package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/logthrottle"
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
	limits      []limit
	defKey      KeyFunc
	skips       []func(*http.Request) bool
	status      int
	body        []byte
	bodyType    string
	denied      http.Handler
	onLimited   func(*http.Request, floodgate.Decision)
	onError     func(http.ResponseWriter, *http.Request, error)
	log         *slog.Logger
	headers     Headers
	maxWait     time.Duration // WithDelay's; 0: refuse at once
	policyField string        // the RateLimit-Policy field, the same for every request

	// Counters padded to their own cache lines: denials can be as frequent
	// as requests.
	denials                           counter
	dryRunDenied, keyErrors, failures counter
	servedOnError, abandoned          counter
	logs                              logthrottle.Throttle // one error line a second
}

// counter is an atomic counter alone on its cache line.
type counter struct {
	atomic.Uint64
	_ [56]byte
}

// limit is one limit of a Middleware, ready to use.
type limit struct {
	l         *floodgate.Limiter
	key       KeyFunc // nil: the middleware's
	cost      func(*http.Request) int64
	n         int64  // the cost when cost is nil
	dryRun    bool   // the limiter's; not advertised
	name      string // in the header fields
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
	if !single && c.maxWait > 0 {
		panic("httplimit: WithDelay is for New: NewAll decides its limits all or nothing, without waiting")
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	m := &Middleware{
		defKey: c.key, skips: c.skips, status: c.status, body: c.body, bodyType: c.bodyType,
		denied: c.denied, onLimited: c.onLimited, onError: c.onError, log: c.log, headers: c.headers,
		maxWait: c.maxWait,
	}
	if m.defKey == nil {
		m.defKey = ClientIP{}.Key
	}
	taken := make(map[string]bool)
	var policy []string
	for i, lc := range limits {
		if lc.Limiter == nil {
			panic("httplimit: limit " + strconv.Itoa(i) + " has a nil Limiter")
		}
		lim := newLimit(lc, &c, limitName(lc, &c, single, taken))
		if !lim.dryRun {
			policy = append(policy, lim.policyItem(lc, &c))
		}
		m.limits = append(m.limits, lim)
	}
	m.policyField = strings.Join(policy, ", ")
	return m
}

// newLimit is lc as the middleware keeps it, named name, with the
// options' cost when lc has none.
func newLimit(lc Limit, c *config, name string) limit {
	lim := limit{l: lc.Limiter, key: lc.Key, cost: lc.Cost, n: 1}
	if lc.Cost == nil {
		lim.cost, lim.n = c.cost, c.n
	}
	lim.name, lim.sfName, lim.dryRun = name, ratelimitfields.String(name), lc.Limiter.DryRun()
	jn, _ := json.Marshal(ratelimitfields.Name(name))
	lim.jsonName = string(jn)
	q, _ := ratelimitfields.QuotaWindow(lc.Limiter.Policy())
	lim.quotaText = strconv.FormatInt(q, 10)
	return lim
}

// limitName names lc: its Name, WithName's for New, else the limiter's
// name, or "default" for a limiter named by its policy; a name taken by
// an earlier limit gets "-2", "-3"... It marks the name taken.
func limitName(lc Limit, c *config, single bool, taken map[string]bool) string {
	name := lc.Name
	if single && c.name != "" {
		name = c.name
	}
	if name == "" {
		name = lc.Limiter.Name()
		if name == lc.Limiter.Policy().String() {
			name = "default"
		}
	}
	for k, base := 2, name; taken[name]; k++ {
		name = base + "-" + strconv.Itoa(k)
	}
	taken[name] = true
	return name
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
func (m *Middleware) Stats() Stats {
	return Stats{
		Denied:        m.denials.Load(),
		DryRunDenied:  m.dryRunDenied.Load(),
		KeyErrors:     m.keyErrors.Load(),
		Errors:        m.failures.Load(),
		ServedOnError: m.servedOnError.Load(),
		Abandoned:     m.abandoned.Load(),
	}
}

// decisionContext is the context of a decided request: it carries the
// decision for DecisionFrom and holds, in one allocation, what a
// one-limit request needs.
type decisionContext struct {
	context.Context
	md      floodgate.MultiDecision
	checks  []floodgate.Check
	binding int // the index of the limit that binds
	one     [1]floodgate.Decision
	check   [1]floodgate.Check
	fields  [2]string // the header fields' slices
}

type decisionKey struct{}

// Value implements context.Context.
func (c *decisionContext) Value(key any) any {
	if _, ok := key.(decisionKey); ok {
		return c
	}
	return c.Context.Value(key)
}

// serve is the middleware's handler.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	for _, skip := range m.skips {
		if skip(r) {
			next.ServeHTTP(w, r)
			return
		}
	}
	dc := &decisionContext{Context: r.Context()}
	var err error
	var keyErr bool
	if len(m.limits) == 1 {
		keyErr, err = m.decideOne(r, dc)
	} else {
		keyErr, err = m.decideAll(r, dc)
	}
	if err != nil && m.undecided(w, r, next, dc, keyErr, err) {
		return
	}
	md := &dc.md
	dc.binding = binding(md)
	h := w.Header()
	if m.headers != NoHeaders {
		m.writeFields(h, md, dc.checks, dc.binding, &dc.fields)
	}
	r = r.WithContext(dc)
	if md.Allowed {
		for i := range md.Decisions {
			if md.Decisions[i].DryRun {
				m.dryRun(r, dc, i)
			}
		}
		next.ServeHTTP(w, r)
		return
	}
	m.denials.Add(1)
	setRetryAfter(h, md.RetryAfter)
	if m.onLimited != nil {
		m.onLimited(r, md.Decisions[dc.binding])
	}
	if m.denied != nil {
		m.denied.ServeHTTP(w, r)
		return
	}
	m.deny(w, r, md)
}

// undecided answers a request whose decision failed with err, and
// reports whether it did; it did not for a dry-run limit's decision on a
// cost above its burst, which stands.
func (m *Middleware) undecided(w http.ResponseWriter, r *http.Request, next http.Handler, dc *decisionContext, keyErr bool, err error) bool {
	switch {
	case keyErr:
		m.keyError(w, r, err)
	case r.Context().Err() != nil && errors.Is(err, r.Context().Err()):
		m.abandoned.Add(1) // gone while waiting: no one to answer
	case dc.md.Allowed && errors.Is(err, algo.ErrCostExceedsBurst):
		return false // a dry-run limit's decision
	case dc.md.Allowed:
		m.servedOnError.Add(1)
		m.logError(r, "httplimit: limiter failed; request served", err)
		next.ServeHTTP(w, r)
	default:
		m.limiterError(w, r, err, dc.md.RetryAfter)
	}
	return true
}

// decideOne decides a request on a middleware's only limit. It returns
// the key function's error, with keyErr set, or the limiter's.
func (m *Middleware) decideOne(r *http.Request, dc *decisionContext) (keyErr bool, err error) {
	lim := &m.limits[0]
	kf := lim.key
	if kf == nil {
		kf = m.defKey
	}
	key, err := kf(r)
	if err != nil {
		return true, err
	}
	n := lim.n
	if lim.cost != nil {
		n = lim.cost(r)
	}
	if m.maxWait > 0 {
		watchDisconnect(r)
	}
	d, err := lim.l.Delay(dc.Context, key, n, m.maxWait)
	dc.one[0] = d
	dc.check[0] = floodgate.Check{Limiter: lim.l, Key: key, N: n, Peek: n == 0}
	dc.checks = dc.check[:]
	dc.md = floodgate.MultiDecision{Allowed: d.Allowed, Denied: -1, Decisions: dc.one[:]}
	if !d.Allowed {
		dc.md.RetryAfter, dc.md.Denied = d.RetryAfter, 0
	}
	return false, err
}

// decideAll decides a request on all of a middleware's limits at once.
func (m *Middleware) decideAll(r *http.Request, dc *decisionContext) (keyErr bool, err error) {
	dc.checks = make([]floodgate.Check, len(m.limits))
	var defKey string
	var haveDef bool
	for i := range m.limits {
		lim := &m.limits[i]
		var key string
		switch {
		case lim.key != nil:
			key, err = lim.key(r)
		case haveDef:
			key = defKey
		default:
			defKey, err = m.defKey(r)
			key, haveDef = defKey, true
		}
		if err != nil {
			return true, err
		}
		n := lim.n
		if lim.cost != nil {
			n = lim.cost(r)
		}
		dc.checks[i] = floodgate.Check{Limiter: lim.l, Key: key, N: n, Peek: n == 0}
	}
	dc.md, err = floodgate.AllowAll(dc.Context, dc.checks...)
	return false, err
}

// binding returns the index of the limit that binds: the one that denied
// with the longest wait, else the one with the least remaining.
func binding(md *floodgate.MultiDecision) int {
	if !md.Allowed && md.Denied >= 0 {
		return md.Denied
	}
	b := 0
	for i := 1; i < len(md.Decisions); i++ {
		if md.Decisions[i].Remaining < md.Decisions[b].Remaining {
			b = i
		}
	}
	return b
}

// dryRun records that limit i, in dry-run mode, would have denied r.
func (m *Middleware) dryRun(r *http.Request, dc *decisionContext, i int) {
	m.dryRunDenied.Add(1)
	d := dc.md.Decisions[i]
	if m.log.Enabled(r.Context(), slog.LevelInfo) {
		m.log.LogAttrs(r.Context(), slog.LevelInfo, "httplimit: dry run: request over the limit, served",
			slog.String("limit", m.limits[i].name), slog.String("key", dc.checks[i].Key),
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Duration("retry_after", d.RetryAfter))
	}
	if m.onLimited != nil {
		m.onLimited(r, d)
	}
}

// keyError answers a request whose key could not be found.
func (m *Middleware) keyError(w http.ResponseWriter, r *http.Request, err error) {
	m.keyErrors.Add(1)
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
	m.failures.Add(1)
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

// logError logs err at level Error, at most once a second; the line counts
// the errors not logged since the last.
func (m *Middleware) logError(r *http.Request, msg string, err error) {
	unlogged, ok := m.logs.Allow()
	if !ok {
		return
	}
	m.log.LogAttrs(r.Context(), slog.LevelError, msg, slog.String("error", err.Error()),
		slog.String("method", r.Method), slog.String("path", r.URL.Path),
		slog.Uint64("unlogged", unlogged))
}

// DecisionFrom returns the decision of the limit that binds on the request
// whose context is ctx: the limit that denied it, or the one with the
// least remaining. It reports false for a context the middleware did not
// decide (a skipped request, one whose limiter failed).
func DecisionFrom(ctx context.Context) (floodgate.Decision, bool) {
	dc, ok := ctx.Value(decisionKey{}).(*decisionContext)
	if !ok {
		return floodgate.Decision{}, false
	}
	return dc.md.Decisions[dc.binding], true
}

// MultiDecisionFrom returns the decisions of every limit on the request
// whose context is ctx, in the order of the limits (one for New). The
// caller must not modify its Decisions. It reports false as DecisionFrom
// does.
func MultiDecisionFrom(ctx context.Context) (floodgate.MultiDecision, bool) {
	dc, ok := ctx.Value(decisionKey{}).(*decisionContext)
	if !ok {
		return floodgate.MultiDecision{}, false
	}
	return dc.md, true
}
