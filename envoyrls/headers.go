package envoyrls

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/internal/ratelimitfields"
	"github.com/floodgate/floodgate/internal/seconds"
)

// Headers selects the rate-limit header fields a Service asks Envoy to
// add to its response to the client (RateLimitResponse's
// response_headers_to_add, which Envoy adds to allowed and refused
// responses alike). They describe one descriptor of the request, the one
// envoyproxy/ratelimit's headers describe: the last descriptor over its
// limit (not counting those in quota mode), else the one with the least
// limit_remaining (the first of those), among those decided against a
// limit; a request with none gets no header. The values are that
// descriptor's status: limit_remaining, and duration_until_reset in
// seconds.
type Headers uint8

const (
	// NoHeaders adds none, the default, as upstream's default.
	NoHeaders Headers = iota
	// RateLimitHeaders are the IETF fields of
	// draft-ietf-httpapi-ratelimit-headers, as package httplimit writes
	// them: RateLimit-Policy ("NAME";q=requests_per_unit;w=the window in
	// seconds, for a fixed window) and RateLimit ("NAME";r=limit_remaining;
	// t=duration_until_reset). NAME is the rule's name, else the domain.
	RateLimitHeaders
	// UpstreamHeaders are envoyproxy/ratelimit's, with
	// LIMIT_RESPONSE_HEADERS_ENABLED and its default names:
	// RateLimit-Limit (requests_per_unit), RateLimit-Remaining
	// (limit_remaining) and RateLimit-Reset (duration_until_reset, in
	// seconds).
	UpstreamHeaders
	// LegacyHeaders are the same three values as X-RateLimit-Limit,
	// X-RateLimit-Remaining and X-RateLimit-Reset, the names many clients
	// read (and httplimit's LegacyHeaders).
	LegacyHeaders
)

var headersNames = [...]string{NoHeaders: "none", RateLimitHeaders: "ietf", UpstreamHeaders: "upstream", LegacyHeaders: "x-ratelimit"}

// String returns the name of h: none, ietf, upstream or x-ratelimit.
func (h Headers) String() string {
	if int(h) < len(headersNames) {
		return headersNames[h]
	}
	return "Headers(" + strconv.Itoa(int(h)) + ")"
}

// MarshalText returns h's name, as String.
func (h Headers) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText sets h from its name (see String); any other text is an
// error wrapping ErrInvalidHeaders.
func (h *Headers) UnmarshalText(text []byte) error {
	for i, name := range headersNames {
		if string(text) == name {
			*h = Headers(i)
			return nil
		}
	}
	return fmt.Errorf("%w: %q: want none, ietf, upstream or x-ratelimit", ErrInvalidHeaders, text)
}

// ErrInvalidHeaders is wrapped by the error of Headers.UnmarshalText for
// a name it does not know.
var ErrInvalidHeaders = errors.New("envoyrls: unknown form of response headers")

// binding returns the index of the status that upstream's response
// headers describe (see Headers), or -1 when no status has a limit.
// quota(j) reports whether descriptor j is in quota mode: over its limit,
// it is described only when it has the least left, as upstream's.
func binding(sts []*rlsv3.RateLimitResponse_DescriptorStatus, quota func(j int) bool) int {
	i, least := -1, uint32(math.MaxUint32)
	for j, st := range sts {
		switch {
		case st.Code == rlsv3.RateLimitResponse_OVER_LIMIT && !quota(j):
			i, least = j, 0
		case st.CurrentLimit != nil && st.LimitRemaining < least:
			i, least = j, st.LimitRemaining
		}
	}
	return i
}

// responseHeaders returns the header fields of form h describing the
// decided descriptor d of the domain domainName, whose status is st.
func (h Headers) responseHeaders(domainName string, d *desc, st *rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	switch h {
	case RateLimitHeaders:
		return ietfHeaders(domainName, d.r, st)
	case UpstreamHeaders:
		return threeHeaders(st, "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")
	case LegacyHeaders:
		return threeHeaders(st, "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")
	}
	return nil
}

// ietfHeaders returns the RateLimit-Policy and RateLimit fields of rule r
// with status st.
func ietfHeaders(domainName string, r *rule, st *rlsv3.RateLimitResponse_DescriptorStatus) []*corev3.HeaderValue {
	name := r.name
	if name == "" {
		name = domainName
	}
	name = ratelimitfields.String(name)
	q, w := int64(r.perUnit), seconds.Ceil(r.period)
	if !r.policy.IsZero() {
		q, w = ratelimitfields.QuotaWindow(r.policy)
	}
	var arr [128]byte
	b := ratelimitfields.AppendPolicy(arr[:0], name, q, w)
	mid := len(b)
	both := string(ratelimitfields.AppendStanding(b, name, int64(st.LimitRemaining), st.DurationUntilReset.GetSeconds()))
	return fields("RateLimit-Policy", both[:mid], "RateLimit", both[mid:])
}

// threeHeaders returns upstream's three fields of status st, named limit,
// remaining and reset.
func threeHeaders(st *rlsv3.RateLimitResponse_DescriptorStatus, limit, remaining, reset string) []*corev3.HeaderValue {
	var arr [32]byte
	b := strconv.AppendUint(arr[:0], uint64(st.CurrentLimit.GetRequestsPerUnit()), 10)
	i := len(b)
	b = strconv.AppendUint(b, uint64(st.LimitRemaining), 10)
	j := len(b)
	all := string(strconv.AppendInt(b, st.DurationUntilReset.GetSeconds(), 10))
	return fields(limit, all[:i], remaining, all[i:j], reset, all[j:])
}

// fields returns the header fields of kv, keys and values alternating,
// allocated together.
func fields(kv ...string) []*corev3.HeaderValue {
	vals := make([]corev3.HeaderValue, len(kv)/2)
	out := make([]*corev3.HeaderValue, len(vals))
	for i := range vals {
		vals[i].Key, vals[i].Value = kv[2*i], kv[2*i+1]
		out[i] = &vals[i]
	}
	return out
}
