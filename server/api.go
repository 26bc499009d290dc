package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/seconds"
	"github.com/floodgate/floodgate/store"
)

// Handler returns the JSON API, behind bearer-token authentication when
// the configuration has tokens:
//
//	POST /v1/check     decide one check, or a batch (all or nothing, or each alone)
//	POST /v1/reset     forget a key's state under a policy
//	GET  /v1/policies  the configured policies
//	POST /json         Envoy's rate-limit service in JSON (with WithEnvoyJSON)
//	GET  /healthcheck  envoyproxy/ratelimit's health check: 200 "OK" when ready, else 500
//
// The serve command's usage documents the requests and answers.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/check", s.endpoint("check", http.MethodPost, s.check))
	mux.Handle("/v1/reset", s.endpoint("reset", http.MethodPost, s.reset))
	mux.Handle("/v1/policies", s.endpoint("policies", http.MethodGet, s.listPolicies))
	if s.envoy != nil {
		mux.Handle("/json", s.endpoint("json", http.MethodPost, func(w http.ResponseWriter, r *http.Request, _ *live) {
			s.envoy.ServeHTTP(w, r) // which bounds its body itself
		}))
	}
	mux.HandleFunc("/healthcheck", s.healthcheck)
	mux.Handle("/", s.endpoint("other", "", func(w http.ResponseWriter, r *http.Request, _ *live) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint: %s (see GET /v1/policies, POST /v1/check, POST /v1/reset)", r.URL.Path))
	}))
	return mux
}

// endpoint wraps an API handler: it counts and times the request, checks
// its method and its token, and gives it the configuration in use.
func (s *Server) endpoint(name, method string, h func(http.ResponseWriter, *http.Request, *live)) http.Handler {
	latency := s.metrics.latency.WithLabelValues("http", name)
	inFlight := s.metrics.inFlight.WithLabelValues("http")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		inFlight.Inc()
		defer inFlight.Dec()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		l := s.cur.Load()
		switch {
		case method != "" && r.Method != method:
			sw.Header().Set("Allow", method)
			writeError(sw, http.StatusMethodNotAllowed, fmt.Sprintf("%s takes %s, not %s", r.URL.Path, method, r.Method))
		case !s.authorized(sw, r, l):
		default:
			h(sw, r, l)
		}
		latency.Observe(time.Since(start).Seconds())
		s.metrics.requests.WithLabelValues("http", name, strconv.Itoa(sw.code)).Inc()
	})
}

// statusWriter records the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the ResponseWriter.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// checkItem is one check of a request: a policy (by name or inline), a key
// and a cost; and, for a check alone, the longest delay it may take.
type checkItem struct {
	Policy     string          `json:"policy"`
	PolicyText string          `json:"policy_text"`
	Key        *string         `json:"key"`
	Cost       json.RawMessage `json:"cost"`
	MaxWait    json.RawMessage `json:"max_wait"`
}

// checkRequest is the body of POST /v1/check: one check, or checks.
type checkRequest struct {
	checkItem
	Checks []checkItem `json:"checks"`
	Mode   string      `json:"mode"`
}

// resetRequest is the body of POST /v1/reset.
type resetRequest struct {
	Policy     string  `json:"policy"`
	PolicyText string  `json:"policy_text"`
	Key        *string `json:"key"`
}

// resolved is a check ready to decide.
type resolved struct {
	lim   *floodgate.Limiter
	label string // the metrics' policy label: the name, or "inline"
	key   string
	cost  int64
}

// badRequest is a problem with a request, for a 400.
type badRequest string

// noBatchWait refuses a max_wait in a batch.
const noBatchWait badRequest = "max_wait goes with one check, not with checks: a batch is decided at once"

// check answers POST /v1/check: one check, or a batch (checks).
func (s *Server) check(w http.ResponseWriter, r *http.Request, l *live) {
	var req checkRequest
	if msg := decodeBody(w, r, l, &req); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if req.Checks == nil {
		if req.Mode != "" {
			writeError(w, http.StatusBadRequest, "mode goes with checks, a batch")
			return
		}
		c, msg := s.resolve(&req.checkItem, l, true)
		if msg != "" {
			writeError(w, http.StatusBadRequest, string(msg))
			return
		}
		if req.MaxWait != nil {
			s.checkScheduled(w, r.Context(), c, req.MaxWait, l)
			return
		}
		s.checkOne(w, r.Context(), c)
		return
	}
	cs, all, msg := s.resolveBatch(&req, l)
	if msg != "" {
		writeError(w, http.StatusBadRequest, string(msg))
		return
	}
	if all {
		s.checkAll(w, r.Context(), cs)
	} else {
		s.checkEach(w, r.Context(), cs)
	}
}

// resolveBatch checks a batch, req.Checks, and finds the limiters of its
// checks; all says whether it is decided all or nothing (mode all, the
// default) rather than each check alone (mode each).
func (s *Server) resolveBatch(req *checkRequest, l *live) (cs []resolved, all bool, msg badRequest) {
	if req.Policy != "" || req.PolicyText != "" || req.Key != nil || req.Cost != nil {
		return nil, false, "give either one check (policy, key, cost) or checks, not both"
	}
	if req.MaxWait != nil {
		return nil, false, noBatchWait
	}
	switch req.Mode {
	case "", "all":
		all = true
	case "each":
	default:
		return nil, false, badRequest(fmt.Sprintf("mode %q: want all (all or nothing, the default) or each", req.Mode))
	}
	switch n := len(req.Checks); {
	case n == 0:
		return nil, false, "checks is empty"
	case n > l.limits.maxChecks:
		return nil, false, badRequest(fmt.Sprintf("%d checks: at most %d in one request", n, l.limits.maxChecks))
	}
	cs = make([]resolved, len(req.Checks))
	for i := range req.Checks {
		c, msg := s.resolve(&req.Checks[i], l, true)
		if msg == "" && req.Checks[i].MaxWait != nil {
			msg = noBatchWait
		}
		if msg != "" {
			return nil, false, badRequest(fmt.Sprintf("checks[%d]: %s", i, msg))
		}
		cs[i] = c
	}
	return cs, all, ""
}

// checkOne decides a single check.
func (s *Server) checkOne(w http.ResponseWriter, ctx context.Context, c resolved) {
	d, err := c.lim.AllowN(ctx, c.key, c.cost)
	if err != nil {
		s.decisionFailed(w, c.label, d.RetryAfter, err)
		return
	}
	b := make([]byte, 0, 96)
	b = appendDecision(b, d)
	writeJSON(w, http.StatusOK, append(b, '\n'))
}

// checkAll decides checks all or nothing.
func (s *Server) checkAll(w http.ResponseWriter, ctx context.Context, cs []resolved) {
	checks := make([]floodgate.Check, len(cs))
	for i, c := range cs {
		checks[i] = floodgate.Check{Limiter: c.lim, Key: c.key, N: c.cost, Peek: c.cost == 0}
	}
	md, err := floodgate.AllowAll(ctx, checks...)
	if err != nil {
		label := cs[0].label
		if md.Denied >= 0 {
			label = cs[md.Denied].label
		}
		s.decisionFailed(w, label, md.RetryAfter, err)
		return
	}
	writeJSON(w, http.StatusOK, appendBatch(nil, md.Allowed, md.RetryAfter, md.Denied, md.Decisions))
}

// checkEach decides each check alone (floodgate.AllowEach): on Redis, the
// whole batch in one round trip.
func (s *Server) checkEach(w http.ResponseWriter, ctx context.Context, cs []resolved) {
	checks := make([]floodgate.Check, len(cs))
	for i, c := range cs {
		checks[i] = floodgate.Check{Limiter: c.lim, Key: c.key, N: c.cost, Peek: c.cost == 0}
	}
	ds, errs := floodgate.AllowEach(ctx, checks...)
	allowed, retry, denied := true, time.Duration(0), -1
	for i, err := range errs {
		if err != nil {
			s.decisionFailed(w, cs[i].label, ds[i].RetryAfter, err)
			return
		}
	}
	for i, d := range ds {
		if !d.Allowed {
			allowed = false
			if denied < 0 || d.RetryAfter > retry {
				denied, retry = i, d.RetryAfter
			}
		}
	}
	writeJSON(w, http.StatusOK, appendBatch(nil, allowed, retry, denied, ds))
}

// decisionFailed answers a decision that failed: 400 for a key the store
// refuses, 503 for a failing store (with Retry-After when the failsafe
// store says when it will try again).
func (s *Server) decisionFailed(w http.ResponseWriter, label string, retry time.Duration, err error) {
	if errors.Is(err, store.ErrInvalidKey) || errors.Is(err, algo.ErrCostExceedsBurst) {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.log.Debug("a decision failed", "policy", label, "err", err)
	secs := int64(1)
	if retry > 0 && retry != algo.Never {
		secs = seconds.Ceil(retry) // at least 1, as retry > 0
	}
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	b, _ := json.Marshal(struct {
		Error      string `json:"error"`
		RetryAfter int64  `json:"retry_after"`
	}{"the store is unavailable: try again later", secs})
	writeJSON(w, http.StatusServiceUnavailable, append(b, '\n'))
}

// resolve checks a check and finds its limiter; withCost says whether the
// check may have a cost (a reset has none).
func (s *Server) resolve(c *checkItem, l *live, withCost bool) (resolved, badRequest) {
	var r resolved
	switch {
	case c.Policy == "" && c.PolicyText == "":
		return r, "give policy (a configured policy's name; see GET /v1/policies) or policy_text"
	case c.Policy != "" && c.PolicyText != "":
		return r, "give policy or policy_text, not both"
	case c.Policy != "":
		r.lim, r.label = l.limiters[c.Policy], c.Policy
		if r.lim == nil {
			return r, badRequest(fmt.Sprintf("unknown policy %q (see GET /v1/policies)", truncate(c.Policy, 80)))
		}
	default:
		lim, msg := s.inlineLimiter(c.PolicyText, l)
		if msg != "" {
			return r, msg
		}
		r.lim, r.label = lim, "inline"
	}
	switch {
	case c.Key == nil:
		return r, "key is required"
	case *c.Key == "":
		return r, "key is empty"
	case len(*c.Key) > l.limits.maxKey:
		return r, badRequest(fmt.Sprintf("key of %d bytes: at most %d", len(*c.Key), l.limits.maxKey))
	}
	r.key = *c.Key
	r.cost = 1
	if !withCost || c.Cost == nil {
		return r, ""
	}
	cost, msg := parseCost(c.Cost)
	if msg != "" {
		return r, msg
	}
	if p := r.lim.Policy(); cost > p.Burst() {
		return r, badRequest(fmt.Sprintf("cost %d is more than policy %q admits at once (%d): it could never be admitted", cost, p.String(), p.Burst()))
	}
	r.cost = cost
	return r, ""
}

// parseCost reads a cost: a whole number from 0 up.
func parseCost(raw json.RawMessage) (int64, badRequest) {
	text := string(raw)
	n, err := strconv.ParseInt(text, 10, 64)
	switch {
	case err == nil && n < 0:
		return 0, badRequest(fmt.Sprintf("cost %d is negative: want 0 (a peek) or more", n))
	case err == nil:
		return n, ""
	case errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(text, "-"):
		return 0, badRequest(fmt.Sprintf("cost %s is too large", truncate(text, 40)))
	}
	return 0, badRequest(fmt.Sprintf("cost %s: want a whole number, 0 (a peek) or more", truncate(text, 40)))
}

// inlineLimiter returns the limiter of an inline policy, made the first
// time and kept for as long as the Server lives, up to the configured
// number of distinct inline policies. Its name is the policy's text, so
// that it shares state with every other user of the store deciding by the
// policy alone (floodgate check --policy, say).
func (s *Server) inlineLimiter(text string, l *live) (*floodgate.Limiter, badRequest) {
	if !l.limits.inline {
		return nil, "policy_text is turned off on this server: give policy, a configured policy's name"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if lim := s.inline[text]; lim != nil {
		return lim, ""
	}
	p, err := algo.ParsePolicy(text)
	if err != nil {
		return nil, badRequest(fmt.Sprintf("policy_text: %v", err))
	}
	canonical := p.String()
	lim := s.inline[canonical]
	if lim == nil {
		if len(s.inline) >= l.limits.maxInline {
			return nil, badRequest(fmt.Sprintf("this server already serves %d distinct inline policies, its limit: give policy, a configured policy's name", len(s.inline)))
		}
		var err error
		if lim, err = floodgate.NewLimiter(p, floodgate.WithStore(s.store), floodgate.WithClock(s.clock), floodgate.WithObserver(s.metrics.limits.Observer("inline"))); err != nil {
			return nil, badRequest(fmt.Sprintf("policy_text: %v", err))
		}
		s.inline[canonical] = lim
	}
	return lim, ""
}

func (s *Server) reset(w http.ResponseWriter, r *http.Request, l *live) {
	var req resetRequest
	if msg := decodeBody(w, r, l, &req); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	c, msg := s.resolve(&checkItem{Policy: req.Policy, PolicyText: req.PolicyText, Key: req.Key}, l, false)
	if msg != "" {
		writeError(w, http.StatusBadRequest, string(msg))
		return
	}
	if err := c.lim.Reset(r.Context(), c.key); err != nil {
		s.decisionFailed(w, c.label, 0, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) listPolicies(w http.ResponseWriter, _ *http.Request, l *live) {
	type policy struct {
		Name      string  `json:"name"`
		Policy    string  `json:"policy"`
		Algorithm string  `json:"algorithm"`
		Limit     int64   `json:"limit"`
		Period    float64 `json:"period"`
		Burst     int64   `json:"burst"`
	}
	out := struct {
		Policies []policy `json:"policies"`
	}{make([]policy, len(l.policies))}
	for i, np := range l.policies {
		p := np.policy
		out.Policies[i] = policy{np.name, p.String(), p.Algorithm().String(), p.Limit(), p.Period().Seconds(), p.Burst()}
	}
	b, _ := json.Marshal(out)
	writeJSON(w, http.StatusOK, append(b, '\n'))
}

// decodeBody decodes a request's JSON body into v, bounded by the
// configured size, and returns the problem with it, or "". It is strict
// where encoding/json is lenient: the body must be valid UTF-8 (JSON's
// encoding: a key of invalid bytes would otherwise become U+FFFD, merging
// distinct keys), and every field must be known, spelt as documented (in
// lower case) and given once (strictFields); nothing may follow the object.
func decodeBody(w http.ResponseWriter, r *http.Request, l *live, v any) string {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, l.limits.maxBody))
	if err == nil {
		err = strictBody(body)
	}
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err = dec.Decode(v); err == nil {
			_, err = dec.Token()
			switch err {
			case io.EOF:
				return ""
			case nil:
				return "malformed JSON: more after the request's object"
			}
		}
	}
	return bodyProblem(err)
}

// bodyProblem says what is wrong with a body that decodeBody refused.
func bodyProblem(err error) string {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var fe fieldError
	switch {
	case errors.As(err, &fe):
		return string(fe)
	case errors.As(err, &mbe):
		return fmt.Sprintf("request body larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF):
		return "empty body: want a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the body ends too soon"
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("want a JSON object, not %s", te.Value)
		}
		field := strings.ReplaceAll(te.Field, "checkItem.", "") // the embedded struct of a single check
		return fmt.Sprintf("field %s: want %s, not %s", field, jsonKind(te.Type.Kind().String()), te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names a Go kind as JSON would.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "ptr":
		return "a string"
	}
	return kind
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// writeJSON writes a JSON body.
func writeJSON(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(code)
	w.Write(body)
}

// writeError writes {"error": msg}.
func writeError(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	writeJSON(w, code, append(b, '\n'))
}

// appendDecision appends a decision's fields as a JSON object.
func appendDecision(b []byte, d floodgate.Decision) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"retry_after":`...)
	b = appendWait(b, d.RetryAfter)
	b = append(b, `,"reset_after":`...)
	b = seconds.Append(b, int64(d.ResetAfter))
	return append(b, '}')
}

// appendBatch appends a batch's answer and a newline.
func appendBatch(b []byte, allowed bool, retry time.Duration, denied int, ds []floodgate.Decision) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, allowed)
	b = append(b, `,"retry_after":`...)
	b = appendWait(b, retry)
	if denied >= 0 {
		b = append(b, `,"denied":`...)
		b = strconv.AppendInt(b, int64(denied), 10)
	}
	b = append(b, `,"results":[`...)
	for i, d := range ds {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendDecision(b, d)
	}
	return append(b, "]}\n"...)
}

// appendWait appends a wait in seconds, -1 for never.
func appendWait(b []byte, d time.Duration) []byte {
	if d == algo.Never {
		return append(b, "-1"...)
	}
	return seconds.Append(b, int64(d))
}
