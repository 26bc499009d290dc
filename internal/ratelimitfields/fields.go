// Package ratelimitfields writes the header fields of the IETF draft
// draft-ietf-httpapi-ratelimit-headers (drafts 08 to 11) as structured
// fields (RFC 9651): RateLimit-Policy, a list of quota policies
//
//	"default";q=100;w=60
//
// (a quota q in a window of w seconds), and RateLimit, the client's
// standing under each
//
//	"default";r=42;t=30
//
// (r units available, within t seconds). It is the one home of their
// syntax, shared by the HTTP middleware (package httplimit) and the Envoy
// service's response headers (package envoyrls); what r and t say of a
// decision is each caller's.
package ratelimitfields

import (
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/seconds"
)

// Name is s as a limit is named to clients, in the header fields and
// wherever else it appears (a problem detail's body): each character that
// a structured-field String cannot hold (a control or non-ASCII) becomes
// '_'. It is the one rule; String applies it.
func Name(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '_'
		}
		return r
	}, s)
}

// String serializes Name(s) as a structured-field String: quoted, with
// '"' and '\' escaped.
func String(s string) string {
	s = Name(s)
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(append(b, '"'))
}

// QuotaWindow returns the RateLimit-Policy q and w of p: its LIMIT and its
// PERIOD in seconds when PERIOD is whole seconds; otherwise w is PERIOD
// rounded up to whole seconds and q the units p allows in w, rounded down
// (10 per 100ms is q=100;w=1), since w is an integer number of seconds.
func QuotaWindow(p algo.Policy) (q, w int64) {
	period := p.Period()
	if period%time.Second == 0 {
		return p.Limit(), int64(period / time.Second)
	}
	w = seconds.Ceil(period)
	hi, lo := bits.Mul64(uint64(p.Limit()), uint64(w)*uint64(time.Second))
	quo, _ := bits.Div64(hi, lo, uint64(period)) // hi < period: limit*w*1e9 < 2^64*period
	return int64(quo), w
}

// AppendPolicy appends a RateLimit-Policy item, name;q=Q;w=W, to b; name
// is already a String (see String).
func AppendPolicy(b []byte, name string, q, w int64) []byte {
	b = append(b, name...)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, q, 10)
	b = append(b, ";w="...)
	return strconv.AppendInt(b, w, 10)
}

// AppendStanding appends a RateLimit item, name;r=R;t=T, to b; name is
// already a String (see String).
func AppendStanding(b []byte, name string, r, t int64) []byte {
	b = append(b, name...)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, r, 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, t, 10)
}
