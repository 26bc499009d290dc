package prommetrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// FrontEndStats are the counts of a front-end that limits requests: an
// httplimit.Middleware's or a grpclimit.Interceptor's Stats, which convert
// to it, as in prommetrics.FrontEndStats(mw.Stats()). The fields mean what
// those Stats' do.
type FrontEndStats struct {
	Denied, DryRunDenied, KeyErrors, Errors, ServedOnError, Abandoned uint64
}

var frontEndDesc = prometheus.NewDesc("floodgate_frontend_requests_total",
	"Requests a front-end (an httplimit middleware, a grpclimit interceptor) did not simply admit, by its name and outcome: denied, dry_run_denied, key_error, error, served_on_error, abandoned.",
	[]string{"frontend", "outcome"}, nil)

// AddFrontEnd adds the counts that stats returns, read at each scrape, as
// floodgate_frontend_requests_total{frontend=name}:
//
//	m.AddFrontEnd("api", func() prommetrics.FrontEndStats { return prommetrics.FrontEndStats(mw.Stats()) })
//
// stats must be safe for concurrent use, as the Stats methods are. It
// fails, with an error wrapping ErrInvalidName, for an empty name, one
// already added, or a nil stats.
func (c *Collector) AddFrontEnd(name string, stats func() FrontEndStats) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case name == "" || stats == nil:
		return fmt.Errorf("prommetrics: %w: front-end %q with stats %v", ErrInvalidName, name, stats != nil)
	case c.frontEnds[name] != nil:
		return fmt.Errorf("prommetrics: %w: front-end %q already added", ErrInvalidName, name)
	}
	if c.frontEnds == nil {
		c.frontEnds = make(map[string]func() FrontEndStats)
	}
	c.frontEnds[name] = stats
	return nil
}

func collectFrontEnd(ch chan<- prometheus.Metric, name string, st FrontEndStats) {
	for _, o := range []struct {
		outcome string
		n       uint64
	}{
		{"denied", st.Denied}, {"dry_run_denied", st.DryRunDenied}, {"key_error", st.KeyErrors},
		{"error", st.Errors}, {"served_on_error", st.ServedOnError}, {"abandoned", st.Abandoned},
	} {
		ch <- prometheus.MustNewConstMetric(frontEndDesc, prometheus.CounterValue, float64(o.n), name, o.outcome)
	}
}
