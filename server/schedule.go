package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/floodgate/floodgate/internal/seconds"
)

// checkScheduled decides a check that may wait up to rawWait (the request's
// max_wait, bounded by limits.max_wait): the units are held from now for
// the earliest time they fit (floodgate.Limiter.Schedule), and the answer
// says how long the caller must wait before acting, in "delay". The
// request is answered at once: the caller sleeps, not the server.
func (s *Server) checkScheduled(w http.ResponseWriter, ctx context.Context, c resolved, rawWait json.RawMessage, l *live) {
	maxWait, msg := parseMaxWait(rawWait)
	if msg != "" {
		writeError(w, http.StatusBadRequest, string(msg))
		return
	}
	r, err := c.lim.Schedule(ctx, c.key, c.cost, min(maxWait, l.limits.maxWait))
	d := r.Decision()
	if err != nil {
		s.decisionFailed(w, c.label, d.RetryAfter, err)
		return
	}
	if d.Allowed {
		s.metrics.observeDelay(c.label, r.Delay())
	}
	b := make([]byte, 0, 112)
	b = appendDecision(b, d)
	b = append(b[:len(b)-1], `,"delay":`...) // inside the decision's object
	b = seconds.Append(b, int64(r.Delay()))
	writeJSON(w, http.StatusOK, append(b, "}\n"...))
}

// parseMaxWait reads a max_wait: seconds from 0 up, such as 2.5.
func parseMaxWait(raw json.RawMessage) (time.Duration, badRequest) {
	text := string(raw)
	ns, err := seconds.Parse(text)
	switch {
	case err == nil:
		return time.Duration(ns), ""
	case errors.Is(err, seconds.ErrRange) && strings.HasPrefix(text, "-"):
		return 0, badRequest(fmt.Sprintf("max_wait %s is negative: want seconds, 0 or more", truncate(text, 40)))
	case errors.Is(err, seconds.ErrRange):
		return 0, badRequest(fmt.Sprintf("max_wait %s is too large: want seconds, such as 2.5", truncate(text, 40)))
	}
	return 0, badRequest(fmt.Sprintf("max_wait %s: want seconds, a number such as 2.5", truncate(text, 40)))
}
