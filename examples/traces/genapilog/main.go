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
	rng := rand.New(rand.NewPCG(2025, 11))
	zone := time.FixedZone("", 3600)
	t0 := time.Date(2025, 11, 18, 9, 0, 0, 0, zone)
	const span = 10 * time.Minute
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	var reqs []request

	// A browser: a page and its API calls every 5 to 15 seconds.
	const firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0"
	for d := ms(0, 3000); d < span; d += ms(5000, 15000) {
		page := fmt.Sprintf("/api/v1/items?page=%d", 1+rng.IntN(12))
		reqs = append(reqs, request{host: "198.51.100.23", method: "GET", target: page,
			referer: "https://shop.example.com/catalog", agent: firefox, start: at(d), took: ms(8, 60), status: 200, size: 2000 + rng.IntN(6000)})
		if rng.IntN(3) == 0 {
			item := fmt.Sprintf("/api/v1/items/%d", 1000+rng.IntN(900))
			reqs = append(reqs, request{host: "198.51.100.23", method: "GET", target: item,
				referer: "https://shop.example.com" + page, agent: firefox, start: at(d + ms(300, 900)), took: ms(5, 40), status: 200, size: 800 + rng.IntN(1500)})
		}
	}

	// A signed-in mobile app: a screen of 4 to 8 calls every 20 to 60
	// seconds, and now and then an order with a slow photo upload.
	const app = "ShopApp/4.12.0 (iPhone; iOS 18.1; Scale/3.00)"
	for d := ms(1000, 5000); d < span; d += ms(20000, 60000) {
		for i := range 4 + rng.IntN(5) {
			target := []string{"/api/v1/cart", "/api/v1/me", "/api/v1/recommendations", "/api/v1/items?page=1", "/static/app.js", "/api/v1/items/1042"}[rng.IntN(6)]
			status := 200
			if target == "/static/app.js" {
				status = 304
			}
			reqs = append(reqs, request{host: "203.0.113.7", user: "mia", method: "GET", target: target,
				agent: app, start: at(d + time.Duration(i)*ms(20, 150)), took: ms(10, 120), status: status, size: 300 + rng.IntN(4000)})
		}
		if rng.IntN(3) == 0 {
			reqs = append(reqs, request{host: "203.0.113.7", user: "mia", method: "POST", target: "/api/v1/orders/photos",
				agent: app, start: at(d + ms(2000, 4000)), took: ms(1500, 4000), status: 201, size: 64})
		}
	}

	// An IPv6 client on the search box, typing: a query per keystroke.
	const chrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"
	for d := ms(20000, 40000); d < span; d += ms(30000, 90000) {
		word := []string{"lamp", "kettle", "desk chair", "headphones", "\"red\" mug"}[rng.IntN(5)]
		for i := 1; i <= len(word); i++ {
			reqs = append(reqs, request{host: "2001:db8:4::1c", method: "GET", target: "/api/v1/search?q=" + escapeQuery(word[:i]),
				referer: "https://shop.example.com/", agent: chrome, start: at(d + time.Duration(i)*ms(120, 400)), took: ms(15, 90), status: 200, size: 500 + rng.IntN(3000)})
		}
		if rng.IntN(2) == 0 {
			reqs = append(reqs, request{host: "2001:db8:4::1c", method: "GET", target: "/api/v1/reports/orders.csv",
				referer: "https://shop.example.com/account", agent: chrome, start: at(d + ms(5000, 8000)), took: ms(900, 2500), status: 200, size: 120000 + rng.IntN(40000)})
		}
	}

	// The load balancer's health probe, every 15 seconds.
	for d := 7 * time.Second; d < span; d += 15 * time.Second {
		reqs = append(reqs, request{host: "10.0.0.5", method: "GET", target: "/healthz",
			agent: "kube-probe/1.31", start: at(d), took: ms(1, 3), status: 200, size: 2})
	}

	// A scraper walking the item list as fast as the server answers, 3 to
	// 5 requests a second for a minute and a half, then once in a while.
	const scraper = "python-requests/2.32.3"
	page := 1
	for d := 3*time.Minute + ms(0, 1000); d < span; {
		reqs = append(reqs, request{host: "192.0.2.44", method: "GET", target: fmt.Sprintf("/api/v1/items?page=%d&per_page=100", page),
			agent: scraper, start: at(d), took: ms(30, 140), status: 200, size: 20000 + rng.IntN(9000)})
		page++
		if d < 4*time.Minute+30*time.Second {
			d += ms(200, 330)
		} else {
			d += ms(20000, 50000)
		}
	}

	for i := range reqs {
		if reqs[i].user == "" {
			reqs[i].user = "-"
		}
		if reqs[i].referer == "" {
			reqs[i].referer = "-"
		}
	}
	// The server logs each request when it ends.
	slices.SortStableFunc(reqs, func(a, b request) int { return a.start.Add(a.took).Compare(b.start.Add(b.took)) })
	f, err := os.Create(*out)
	if err != nil {
		log.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for _, r := range reqs {
		fmt.Fprintf(w, "%s - %s [%s] \"%s %s HTTP/1.1\" %d %d \"%s\" \"%s\"\n", r.host, r.user,
			r.start.Format("02/Jan/2006:15:04:05 -0700"), r.method, r.target, r.status, r.size, r.referer, r.agent)
	}
	if err := w.Flush(); err != nil {
		log.Fatal(err)
	}
	if err := f.Close(); err != nil {
		log.Fatal(err)
	}
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
