package prommetrics_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/clock"
	"github.com/floodgate/floodgate/grpclimit"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/prommetrics"
)

// Both front-ends' Stats convert to FrontEndStats: this file does not
// compile when their fields part.
var _ = []prommetrics.FrontEndStats{
	prommetrics.FrontEndStats(httplimit.Stats{}),
	prommetrics.FrontEndStats(grpclimit.Stats{}),
}

// TestFrontEnd counts an httplimit middleware's denial.
func TestFrontEnd(t *testing.T) {
	lim := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 1/1h"), floodgate.WithClock(clock.NewFake(epoch))))
	mw := httplimit.New(lim)
	h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	m := prommetrics.New()
	if err := m.AddFrontEnd("api", func() prommetrics.FrontEndStats { return prommetrics.FrontEndStats(mw.Stats()) }); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}
	want := map[string]float64{}
	for _, o := range []string{"denied", "dry_run_denied", "key_error", "error", "served_on_error", "abandoned"} {
		want[`floodgate_frontend_requests_total{frontend="api",outcome="`+o+`"}`] = 0
	}
	want[`floodgate_frontend_requests_total{frontend="api",outcome="denied"}`] = 2
	check(t, "two of three denied", scrape(t, m), want)
}

func TestAddFrontEndErrors(t *testing.T) {
	m := prommetrics.New()
	stats := func() prommetrics.FrontEndStats { return prommetrics.FrontEndStats{} }
	if err := m.AddFrontEnd("api", stats); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		stats func() prommetrics.FrontEndStats
	}{{"", stats}, {"api", stats}, {"web", nil}} {
		if err := m.AddFrontEnd(tt.name, tt.stats); !errors.Is(err, prommetrics.ErrInvalidName) {
			t.Errorf("AddFrontEnd(%q, stats %v): %v, want ErrInvalidName", tt.name, tt.stats != nil, err)
		}
	}
}
