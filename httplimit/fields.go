package httplimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/ratelimitfields"
	"github.com/floodgate/floodgate/internal/seconds"
)

// Canonical header names, so that the hot path writes the header map
// directly instead of canonicalizing with Header.Set.
const (
	hRateLimit       = "Ratelimit"
	hRateLimitPolicy = "Ratelimit-Policy"
	hRetryAfter      = "Retry-After"
	hXLimit          = "X-Ratelimit-Limit"
	hXRemaining      = "X-Ratelimit-Remaining"
	hXReset          = "X-Ratelimit-Reset"
)

// Headers selects the rate-limit header fields the middleware writes, on
// admitted requests and denials alike; a denial always has Retry-After.
type Headers uint8

const (
	// RateLimitHeaders are the IETF fields of
	// draft-ietf-httpapi-ratelimit-headers (drafts 08 to 11), as
	// structured fields: RateLimit-Policy, the policies
	// ("default";q=100;w=60), and RateLimit, the client's standing under
	// each ("default";r=42;t=30). The default.
	RateLimitHeaders Headers = 1 << iota
	// LegacyHeaders are X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset, as many clients still read them, for the limit
	// that binds (the one that denied, else the one with the least
	// remaining). X-RateLimit-Reset is in seconds from now, like t,
	// not a Unix time.
	LegacyHeaders
	// NoHeaders writes none: a server may not want to tell clients its
	// limits (the draft's section 8.2).
	NoHeaders Headers = 0
)

// standing returns what the RateLimit field says of decision d of a
// request costing n: r, the units available, and t, the seconds within
// which no more than r may be used. For an admitted request t is the time
// until the key's quota is whole again (ResetAfter); for a denied one, the
// time until the request would be admitted (RetryAfter), or ResetAfter for
// one that never will be. When the request as a whole was denied by
// another limit, nothing was spent, and an admitting limit's r is its
// Remaining plus n.
func standing(d floodgate.Decision, n int64, deniedAll bool) (r, t int64) {
	r, wait := d.Remaining, d.ResetAfter
	switch {
	case !d.Allowed && d.RetryAfter != algo.Never:
		wait = d.RetryAfter
	case d.Allowed && deniedAll && !d.DryRun:
		r += n
	}
	return max(r, 0), seconds.Ceil(wait)
}

// writeFields sets the rate-limit header fields of a request decided by md
// on h, before the response is written; checks holds each limit's cost.
// The fields' slices are vals, which the caller allocates with the rest of
// the request's state.
func (m *Middleware) writeFields(h http.Header, md *floodgate.MultiDecision, checks []floodgate.Check, binding int, vals *[2]string) {
	if m.headers&RateLimitHeaders != 0 && m.policyField != "" {
		var arr [128]byte
		b := arr[:0]
		for i := range md.Decisions {
			if !decided(&md.Decisions[i]) || m.limits[i].DryRun {
				continue
			}
			if len(b) > 0 {
				b = append(b, ", "...)
			}
			r, t := standing(md.Decisions[i], checks[i].N, !md.Allowed)
			b = ratelimitfields.AppendStanding(b, m.limits[i].sfName, r, t)
		}
		vals[0], vals[1] = m.policyField, string(b)
		addField(h, hRateLimitPolicy, vals[0:1:1])
		addField(h, hRateLimit, vals[1:2:2])
	}
	if m.headers&LegacyHeaders != 0 && binding >= 0 && !m.limits[binding].DryRun {
		r, t := standing(md.Decisions[binding], checks[binding].N, !md.Allowed)
		h[hXLimit] = []string{m.limits[binding].quotaText}
		h[hXRemaining] = []string{strconv.FormatInt(r, 10)}
		h[hXReset] = []string{strconv.FormatInt(t, 10)}
	}
}

// addField adds the items of val, one field line, to h's field name: a
// middleware further out (another Middleware on the same route) may have
// set its own, and a structured-field List may span several lines.
func addField(h http.Header, name string, val []string) {
	if old := h[name]; len(old) > 0 {
		val = append(old[:len(old):len(old)], val[0])
	}
	h[name] = val
}

// decided reports whether d is a decision, not the zero Decision that
// AllowAll leaves for a dry-run limit when another limit denies.
func decided(d *floodgate.Decision) bool { return !d.Policy().IsZero() }

// setRetryAfter sets Retry-After to d in whole seconds, rounded up so that
// a client waiting that long is never early; at least 1. Never, for a
// request that can never be admitted, sets nothing.
func setRetryAfter(h http.Header, d time.Duration) {
	if d == algo.Never {
		return
	}
	h[hRetryAfter] = []string{strconv.FormatInt(max(seconds.Ceil(d), 1), 10)}
}
