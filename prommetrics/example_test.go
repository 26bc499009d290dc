package prommetrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/prommetrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A limiter's decisions and its memory store's keys, served at /metrics
// and scraped.
func Example() {
	m := prommetrics.New()
	login := floodgate.Must(floodgate.NewLimiter(algo.MustParsePolicy("fixed-window 2/1m"),
		floodgate.WithName("login"), floodgate.WithObserver(m.Observer("login"))))
	if err := m.AddStore("login", login.Store()); err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	for range 3 {
		login.Allow(context.Background(), "alice")
	}

	resp, err := http.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "floodgate_decisions_total{") || strings.HasPrefix(line, "floodgate_memory_keys{") {
			fmt.Println(line)
		}
	}
	// Output:
	// floodgate_decisions_total{policy="login",result="allowed"} 2
	// floodgate_decisions_total{policy="login",result="denied"} 1
	// floodgate_decisions_total{policy="login",result="dry_run_denied"} 0
	// floodgate_decisions_total{policy="login",result="error"} 0
	// floodgate_memory_keys{store="login"} 1
}
