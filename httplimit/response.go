package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/internal/seconds"
)

// The problem type of draft-ietf-httpapi-ratelimit-headers for a request
// over a quota.
const quotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// deny writes the default response to a denied request: m's fixed body if
// it has one, else an RFC 9457 problem (application/problem+json) when the
// client accepts JSON, plain text otherwise.
func (m *Middleware) deny(w http.ResponseWriter, r *http.Request, md *floodgate.MultiDecision) {
	h := w.Header()
	h["X-Content-Type-Options"] = []string{"nosniff"}
	if m.body != nil {
		h["Content-Type"] = []string{m.bodyType}
		w.WriteHeader(m.status)
		w.Write(m.body)
		return
	}
	var detail string
	if md.RetryAfter == algo.Never {
		detail = "This request costs more than the rate limit allows at once: it can never be admitted."
	} else {
		s := max(seconds.Ceil(md.RetryAfter), 1)
		unit := " seconds."
		if s == 1 {
			unit = " second."
		}
		detail = "Too many requests: retry in " + strconv.FormatInt(s, 10) + unit
	}
	if !wantsJSON(r.Header.Values("Accept")) {
		writeText(w, m.status, detail)
		return
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"type":"`+quotaExceeded+`","title":"Quota Exceeded","status":`...)
	b = strconv.AppendInt(b, int64(m.status), 10)
	b = append(b, `,"detail":"`...)
	b = append(b, detail...) // plain ASCII, no character to escape
	b = append(b, `","violated-policies":[`...)
	first := true
	for i, d := range md.Decisions {
		if !d.Allowed && decided(&d) {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, m.limits[i].jsonName...)
		}
	}
	b = append(b, "]}\n"...)
	h["Content-Type"] = []string{"application/problem+json"}
	w.WriteHeader(m.status)
	w.Write(b)
}

// problem writes a response of status with detail, as a problem of type
// about:blank or as text, by the Accept header.
func problem(w http.ResponseWriter, r *http.Request, status int, detail string) {
	h := w.Header()
	h["X-Content-Type-Options"] = []string{"nosniff"}
	if !wantsJSON(r.Header.Values("Accept")) {
		writeText(w, status, detail)
		return
	}
	b, _ := json.Marshal(struct {
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{http.StatusText(status), status, detail})
	h["Content-Type"] = []string{"application/problem+json"}
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeText(w http.ResponseWriter, status int, detail string) {
	w.Header()["Content-Type"] = []string{"text/plain; charset=utf-8"}
	w.WriteHeader(status)
	w.Write([]byte(detail + "\n"))
}

// wantsJSON reports whether the Accept header fields prefer JSON to text:
// whether the best q of application/json, application/problem+json,
// another application/*+json or application/* is positive and not below
// the best of text/plain, text/* and */*. Without an Accept header, text.
func wantsJSON(accept []string) bool {
	var jsonQ, textQ float64
	for _, field := range accept {
		for field != "" {
			var item string
			item, field, _ = strings.Cut(field, ",")
			mt, params, _ := strings.Cut(item, ";")
			mt = strings.ToLower(trimOWS(mt))
			q := qValue(params)
			switch {
			case mt == "application/json", mt == "application/problem+json",
				strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"),
				mt == "application/*":
				jsonQ = max(jsonQ, q)
			case mt == "text/plain", mt == "text/*", mt == "*/*":
				textQ = max(textQ, q)
			}
		}
	}
	return jsonQ > 0 && jsonQ >= textQ
}

// qValue returns the q parameter among an Accept item's parameters: 1 when
// absent, 0 when malformed.
func qValue(params string) float64 {
	for params != "" {
		var p string
		p, params, _ = strings.Cut(params, ";")
		name, val, ok := strings.Cut(trimOWS(p), "=")
		if !ok || !strings.EqualFold(trimOWS(name), "q") {
			continue
		}
		q, err := strconv.ParseFloat(trimOWS(val), 64)
		if err != nil || q < 0 || q > 1 {
			return 0
		}
		return q
	}
	return 1
}

// retryAfterOnError is the Retry-After of a 503 for a limiter error that
// does not say when to retry.
const retryAfterOnError = time.Second
