// Command genapilog writes examples/traces/api.log, ten minutes of a
// small shop's API as its web server logged them, in the Combined Log
// Format: a browser, a mobile app, an IPv6 client and a health probe, and
// a scraper that hammers the item list for two minutes. The same seed
// gives the same log.
//
// A server stamps a request with the time it began and logs it when it
// ends, so slow requests (uploads, reports) come after faster ones that
// began later, as in a real log.
//
// It also draws docs/simulate.svg from the log, with floodgate simulate.
//
//go:generate go run . -o ../api.log
//go:generate go run ../../../cmd/floodgate simulate --input-format combined --policy "token-bucket 100/1m burst=20" --plot ../../../docs/simulate.svg -q ../api.log
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"slices"
	"time"
)

// request is one request: who sent it, when it began and how long it took.
type request struct {
	host, user, method, target, referer, agent string
	start                                      time.Time
	took                                       time.Duration
	status, size                               int
}

func main() {
	out := flag.String("o", "api.log", "the file to write")
	flag.Parse()
	g := &generator{rng: rand.New(rand.NewPCG(2025, 11)), t0: time.Date(2025, 11, 18, 9, 0, 0, 0, time.FixedZone("", 3600))}
	// Each client draws from the one generator in turn: the order is part
	// of the seed's log.
	g.browser()
	g.mobileApp()
	g.searcher()
	g.probe()
	g.scraper()
	if err := writeLog(*out, g.reqs); err != nil {
		log.Fatal(err)
	}
}

// span is how long the log runs.
const span = 10 * time.Minute

// generator draws the requests of the clients, from t0 on.
type generator struct {
	rng  *rand.Rand
	t0   time.Time
	reqs []request
}

func (g *generator) at(d time.Duration) time.Time { return g.t0.Add(d) }

// ms draws a duration of lo to hi milliseconds.
func (g *generator) ms(lo, hi int) time.Duration {
	return time.Duration(lo+g.rng.IntN(hi-lo+1)) * time.Millisecond
}

func (g *generator) add(r request) { g.reqs = append(g.reqs, r) }

// browser: a page and its API calls every 5 to 15 seconds.
func (g *generator) browser() {
	const firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"
	for d := g.ms(0, 3000); d < span; d += g.ms(5000, 15000) {
		page := fmt.Sprintf("/api/v1/items?page=%d", 1+g.rng.IntN(12))
		g.add(request{host: "198.51.100.23", method: "GET", target: page,
			referer: "https://shop.example.com/catalog", agent: firefox, start: g.at(d), took: g.ms(8, 60), status: 200, size: 2000 + g.rng.IntN(6000)})
		if g.rng.IntN(3) == 0 {
			item := fmt.Sprintf("/api/v1/items/%d", 1000+g.rng.IntN(900))
			g.add(request{host: "198.51.100.23", method: "GET", target: item,
				referer: "https://shop.example.com" + page, agent: firefox, start: g.at(d + g.ms(300, 900)), took: g.ms(5, 40), status: 200, size: 800 + g.rng.IntN(1500)})
		}
	}
}

// mobileApp: a signed-in app, a screen of 4 to 8 calls every 20 to 60
// seconds, and now and then an order with a slow photo upload.
func (g *generator) mobileApp() {
	const app = "ShopApp/4.12.0 (iPhone; iOS 18.1; Scale/3.00)"
	for d := g.ms(1000, 5000); d < span; d += g.ms(20000, 60000) {
		for i := range 4 + g.rng.IntN(5) {
			target := []string{"/api/v1/cart", "/api/v1/me", "/api/v1/recommendations", "/api/v1/items?page=1", "/static/app.js", "/api/v1/items/1042"}[g.rng.IntN(6)]
			status := 200
			if target == "/static/app.js" {
				status = 304
			}
			g.add(request{host: "203.0.113.7", user: "mia", method: "GET", target: target,
				agent: app, start: g.at(d + time.Duration(i)*g.ms(20, 150)), took: g.ms(10, 120), status: status, size: 300 + g.rng.IntN(4000)})
		}
		if g.rng.IntN(3) == 0 {
			g.add(request{host: "203.0.113.7", user: "mia", method: "POST", target: "/api/v1/orders/photos",
				agent: app, start: g.at(d + g.ms(2000, 4000)), took: g.ms(1500, 4000), status: 201, size: 64})
		}
	}
}

// searcher: an IPv6 client on the search box, typing: a query per
// keystroke, and now and then a report.
func (g *generator) searcher() {
	const chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	for d := g.ms(20000, 40000); d < span; d += g.ms(30000, 90000) {
		word := []string{"lamp", "kettle", "desk chair", "headphones", "\"red\" mug"}[g.rng.IntN(5)]
		for i := 1; i <= len(word); i++ {
			g.add(request{host: "2001:db8:4::1c", method: "GET", target: "/api/v1/search?q=" + escapeQuery(word[:i]),
				referer: "https://shop.example.com/", agent: chrome, start: g.at(d + time.Duration(i)*g.ms(120, 400)), took: g.ms(15, 90), status: 200, size: 500 + g.rng.IntN(3000)})
		}
		if g.rng.IntN(2) == 0 {
			g.add(request{host: "2001:db8:4::1c", method: "GET", target: "/api/v1/reports/orders.csv",
				referer: "https://shop.example.com/account", agent: chrome, start: g.at(d + g.ms(5000, 8000)), took: g.ms(900, 2500), status: 200, size: 120000 + g.rng.IntN(40000)})
		}
	}
}

// probe: the load balancer's health probe, every 15 seconds.
func (g *generator) probe() {
	for d := 7 * time.Second; d < span; d += 15 * time.Second {
		g.add(request{host: "10.0.0.5", method: "GET", target: "/healthz",
			agent: "kube-probe/1.31", start: g.at(d), took: g.ms(1, 3), status: 200, size: 2})
	}
}

// scraper: a client walking the item list as fast as the server answers,
// 3 to 5 requests a second for a minute and a half, then once in a while.
func (g *generator) scraper() {
	const scraper = "python-requests/2.32.3"
	page := 1
	for d := 3*time.Minute + g.ms(0, 1000); d < span; {
		g.add(request{host: "192.0.2.44", method: "GET", target: fmt.Sprintf("/api/v1/items?page=%d&per_page=100", page),
			agent: scraper, start: g.at(d), took: g.ms(30, 140), status: 200, size: 20000 + g.rng.IntN(9000)})
		page++
		if d < 4*time.Minute+30*time.Second {
			d += g.ms(200, 330)
		} else {
			d += g.ms(20000, 50000)
		}
	}
}

// writeLog writes reqs to the file out in the Combined Log Format, in the
// order a server logs them: each when it ends.
func writeLog(out string, reqs []request) error {
	slices.SortStableFunc(reqs, func(a, b request) int { return a.start.Add(a.took).Compare(b.start.Add(b.took)) })
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	for _, r := range reqs {
		fmt.Fprintf(w, "%s - %s [%s] \"%s %s HTTP/1.1\" %d %d \"%s\" \"%s\"\n", r.host, dash(r.user),
			r.start.Format("02/Jan/2006:15:04:05 -0700"), r.method, r.target, r.status, r.size, dash(r.referer), r.agent)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// dash is s, or "-" for a field the request did not have.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// escapeQuery escapes a query value as a browser does: spaces as +, and
// quotes and backslashes as %XX.
func escapeQuery(s string) string {
	var b []byte
	for i := range len(s) {
		switch c := s[i]; c {
		case ' ':
			b = append(b, '+')
		case '"', '\\', '&', '+', '%':
			b = fmt.Appendf(b, "%%%02X", c)
		default:
			b = append(b, c)
		}
	}
	return string(b)
}
