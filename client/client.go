// Package client is a Go client of floodgate serve's HTTP JSON API (see
// package server): checks one at a time or in batches, peeks, resets and
// the list of policies, each bounded by its context.
//
//	c, err := client.New("http://127.0.0.1:8080", client.WithToken(token))
//	d, err := c.Check(ctx, "login", "alice")
//	if err == nil && !d.Allowed {
//		// refused: retry after d.RetryAfter
//	}
//
// A check with a MaxWait takes a place in the key's queue instead of a
// refusal: the server holds its units for the earliest time they fit and
// the Decision's Delay says how long to wait before acting; Wait does the
// waiting.
//
// A refusal is a Decision with Allowed false, not an error. Errors are the
// server's (*Error: a bad request, a missing or wrong token, a failing
// store; test them with errors.Is against ErrBadRequest, ErrUnauthorized
// and ErrUnavailable) or the transport's. A Client is safe for concurrent
// use.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"

	"github.com/floodgate/floodgate/internal/seconds"
)

// Errors that an *Error wraps, by the server's status code; test for them
// with errors.Is.
var (
	// ErrBadRequest is a 400: the request was malformed (an unknown
	// policy, a bad cost, a key too long...); Error.Message says what.
	ErrBadRequest = errors.New("bad request")
	// ErrUnauthorized is a 401: the server wants a valid bearer token.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrUnavailable is a 503: the server's store is failing (or it is
	// shutting down); retry after Error.RetryAfter.
	ErrUnavailable = errors.New("service unavailable")
)

// Error is an answer of the server other than a success.
type Error struct {
	StatusCode int
	// Message is the server's explanation ({"error": ...}), or the start
	// of its body when it sent no JSON error.
	Message string
	// RetryAfter is the server's Retry-After, or 0.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("floodgate server: %d %s: %s", e.StatusCode, http.StatusText(e.StatusCode), e.Message)
}

// Is reports whether e is of the kind of target: ErrBadRequest,
// ErrUnauthorized or ErrUnavailable.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrBadRequest:
		return e.StatusCode == http.StatusBadRequest
	case ErrUnauthorized:
		return e.StatusCode == http.StatusUnauthorized
	case ErrUnavailable:
		return e.StatusCode == http.StatusServiceUnavailable
	}
	return false
}

// Client is a client of one floodgate server.
type Client struct {
	base  string // the server's URL, without a trailing slash
	hc    *http.Client
	token string
	clock clock.Clock // what Wait sleeps on
}

// An Option configures New.
type Option interface{ apply(*Client) }

type optionFunc func(*Client)

func (f optionFunc) apply(c *Client) { f(c) }

// WithHTTPClient sends requests with hc (for TLS settings, client
// certificates, timeouts) instead of http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option { return optionFunc(func(c *Client) { c.hc = hc }) }

// WithClock makes Wait sleep on c instead of the system clock: tests pass
// a clock.Fake.
func WithClock(c clock.Clock) Option { return optionFunc(func(cl *Client) { cl.clock = c }) }

// WithToken sends "Authorization: Bearer token" with every request.
func WithToken(token string) Option { return optionFunc(func(c *Client) { c.token = token }) }

// New returns a client of the server at baseURL, such as
// "http://127.0.0.1:8080" or "https://limits.internal:8443".
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: server URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: server URL %q: want http://HOST:PORT or https://HOST:PORT", baseURL)
	}
	c := &Client{base: strings.TrimSuffix(baseURL, "/"), hc: http.DefaultClient, clock: clock.Real{}}
	for _, o := range opts {
		o.apply(c)
	}
	return c, nil
}

// Check is one check of a request: a key under a policy, at a cost.
type Check struct {
	// Policy names one of the server's policies (see Policies); or
	// PolicyText gives one inline, such as "token-bucket 5/1s".
	Policy, PolicyText string
	Key                string
	// Cost is the units to spend: 0 means 1. Peek spends none.
	Cost int64
	Peek bool
	// MaxWait, when not 0, is the longest the check may wait its turn
	// (the API's max_wait): admitted after a Delay of at most MaxWait, or
	// refused. The server bounds it by its limits.max_wait. Only for
	// Decide and Wait, not in a batch.
	MaxWait time.Duration
}

// Decision is the server's answer to one check.
type Decision struct {
	Allowed   bool
	Remaining int64 // units the key would still admit now
	// RetryAfter is 0 when allowed; else the wait after which the check
	// would pass, or algo.Never.
	RetryAfter time.Duration
	// ResetAfter is the time until the key is back to its initial state.
	ResetAfter time.Duration
	// Delay is, for a check admitted with a MaxWait, how long to wait
	// before acting: its units are held from the answer on. 0 otherwise.
	Delay time.Duration
}

// Batch is the server's answer to several checks.
type Batch struct {
	// Allowed reports whether every check was allowed.
	Allowed bool
	// RetryAfter is the longest RetryAfter of the refusals, or 0.
	RetryAfter time.Duration
	// Denied is the index of the check that refused with that
	// RetryAfter, or -1 when all were allowed.
	Denied int
	// Results holds each check's decision, in order. In CheckAll, when
	// one refused, nothing was spent, and the others say what they
	// would have decided.
	Results []Decision
}

// Policy is one of the server's policies.
type Policy struct {
	Name, Policy, Algorithm string
	Limit                   int64
	Period                  time.Duration
	Burst                   int64
}

// Check spends one unit of key under the named policy, if the policy
// admits it.
func (c *Client) Check(ctx context.Context, policy, key string) (Decision, error) {
	return c.Decide(ctx, Check{Policy: policy, Key: key})
}

// Peek reports key's headroom under the named policy, spending nothing.
func (c *Client) Peek(ctx context.Context, policy, key string) (Decision, error) {
	return c.Decide(ctx, Check{Policy: policy, Key: key, Peek: true})
}

// Decide decides one check.
func (c *Client) Decide(ctx context.Context, ch Check) (Decision, error) {
	b := appendCheck([]byte{}, ch)
	var out decisionJSON
	if err := c.do(ctx, http.MethodPost, "/v1/check", b, &out); err != nil {
		return Decision{}, err
	}
	return out.decision()
}

// CheckAll decides checks all or nothing: allowed only if every check is,
// and then each spends its cost; if one refuses, none spends anything.
func (c *Client) CheckAll(ctx context.Context, checks ...Check) (Batch, error) {
	return c.batch(ctx, "all", checks)
}

// CheckEach decides each check alone.
func (c *Client) CheckEach(ctx context.Context, checks ...Check) (Batch, error) {
	return c.batch(ctx, "each", checks)
}

func (c *Client) batch(ctx context.Context, mode string, checks []Check) (Batch, error) {
	b := []byte(`{"mode":"` + mode + `","checks":[`)
	for i, ch := range checks {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendCheck(b, ch)
	}
	b = append(b, "]}"...)
	var out struct {
		Allowed    bool           `json:"allowed"`
		RetryAfter json.Number    `json:"retry_after"`
		Denied     *int           `json:"denied"`
		Results    []decisionJSON `json:"results"`
	}
	if err := c.do(ctx, http.MethodPost, "/v1/check", b, &out); err != nil {
		return Batch{}, err
	}
	bd := Batch{Allowed: out.Allowed, Denied: -1, Results: make([]Decision, len(out.Results))}
	var err error
	if bd.RetryAfter, err = duration(out.RetryAfter); err != nil {
		return Batch{}, err
	}
	if out.Denied != nil {
		bd.Denied = *out.Denied
	}
	for i, d := range out.Results {
		if bd.Results[i], err = d.decision(); err != nil {
			return Batch{}, err
		}
	}
	if len(bd.Results) != len(checks) {
		return Batch{}, fmt.Errorf("client: %d results for %d checks", len(bd.Results), len(checks))
	}
	return bd, nil
}

// Reset forgets the state of ch's key under ch's policy (its cost and
// MaxWait are not used): its next check is decided as the first.
func (c *Client) Reset(ctx context.Context, ch Check) error {
	ch.Cost, ch.Peek, ch.MaxWait = 0, false, 0
	b := appendCheck(nil, ch)
	return c.do(ctx, http.MethodPost, "/v1/reset", b, nil)
}

// Policies returns the server's policies, sorted by name.
func (c *Client) Policies(ctx context.Context) ([]Policy, error) {
	var out struct {
		Policies []struct {
			Name      string      `json:"name"`
			Policy    string      `json:"policy"`
			Algorithm string      `json:"algorithm"`
			Limit     int64       `json:"limit"`
			Period    json.Number `json:"period"`
			Burst     int64       `json:"burst"`
		} `json:"policies"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/policies", nil, &out); err != nil {
		return nil, err
	}
	ps := make([]Policy, len(out.Policies))
	for i, p := range out.Policies {
		period, err := duration(p.Period)
		if err != nil {
			return nil, err
		}
		ps[i] = Policy{Name: p.Name, Policy: p.Policy, Algorithm: p.Algorithm, Limit: p.Limit, Period: period, Burst: p.Burst}
	}
	return ps, nil
}

// appendCheck appends a check as the API's JSON object.
func appendCheck(b []byte, ch Check) []byte {
	b = append(b, '{')
	if ch.PolicyText != "" {
		b = append(b, `"policy_text":`...)
		b = appendString(b, ch.PolicyText)
	} else {
		b = append(b, `"policy":`...)
		b = appendString(b, ch.Policy)
	}
	b = append(b, `,"key":`...)
	b = appendString(b, ch.Key)
	switch {
	case ch.Peek:
		b = append(b, `,"cost":0`...)
	case ch.Cost != 0:
		b = append(b, `,"cost":`...)
		b = strconv.AppendInt(b, ch.Cost, 10)
	}
	if ch.MaxWait != 0 {
		b = append(b, `,"max_wait":`...)
		b = seconds.Append(b, int64(ch.MaxWait))
	}
	return append(b, '}')
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// decisionJSON is a decision as the server writes it.
type decisionJSON struct {
	Allowed    bool        `json:"allowed"`
	Remaining  int64       `json:"remaining"`
	RetryAfter json.Number `json:"retry_after"`
	ResetAfter json.Number `json:"reset_after"`
	Delay      json.Number `json:"delay"`
}

func (d decisionJSON) decision() (Decision, error) {
	retry, err := duration(d.RetryAfter)
	if err != nil {
		return Decision{}, err
	}
	reset, err := duration(d.ResetAfter)
	if err != nil {
		return Decision{}, err
	}
	delay, err := duration(d.Delay)
	if err != nil {
		return Decision{}, err
	}
	return Decision{Allowed: d.Allowed, Remaining: d.Remaining, RetryAfter: retry, ResetAfter: reset, Delay: delay}, nil
}

// duration reads the server's seconds exactly, to the nanosecond; -1 is
// algo.Never.
func duration(n json.Number) (time.Duration, error) {
	switch n {
	case "":
		return 0, nil
	case "-1":
		return algo.Never, nil
	}
	ns, err := seconds.Parse(string(n))
	if err != nil {
		return 0, fmt.Errorf("client: the server sent a bad duration: %w", err)
	}
	return time.Duration(ns), nil
}

// maxResponse bounds what the client reads of a response.
const maxResponse = 16 << 20

// do sends a request and decodes a 2xx answer's JSON into out (nil: none
// expected), or returns an *Error.
func (c *Client) do(ctx context.Context, method, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("client: reading the answer: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return responseError(resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: the server's answer: %w", err)
	}
	return nil
}

// responseError makes the *Error of a failed request.
func responseError(resp *http.Response, data []byte) *Error {
	e := &Error{StatusCode: resp.StatusCode}
	var body struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != "" {
		e.Message = body.Error
	} else {
		e.Message = strings.TrimSpace(string(data[:min(len(data), 200)]))
	}
	if s, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}
