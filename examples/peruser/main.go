// Command peruser is the README's Go service: it answers "hello" to each
// user (the X-User header) within a rate limit per user.
//
//	go run ./examples/peruser                                   # 5 at once, then 10 a minute, per user
//	go run ./examples/peruser -store redis://127.0.0.1:6379     # shared by every copy on that Redis
//	go run ./examples/peruser -policy 'leaky-bucket 1/1s capacity=9' -delay 4s   # nginx's burst=12 delay=8
//
// The README's recipes run it; cmd/floodgate's TestReadme runs them.
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/floodgate/floodgate"
	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/httplimit"
	"github.com/floodgate/floodgate/storeurl"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8090", "address to listen on")
	policy := flag.String("policy", "token-bucket 10/1m burst=5", "each user's limit")
	storeURL := flag.String("store", "memory", "where the limits live: memory, file:PATH, redis://HOST:PORT")
	delay := flag.Duration("delay", 0, "queue a request over the limit for up to this long, instead of refusing it")
	flag.Parse()

	p, err := algo.ParsePolicy(*policy)
	if err != nil {
		log.Fatal(err)
	}
	s, closer, err := storeurl.Open(*storeURL)
	if err != nil {
		log.Fatal(err)
	}
	defer closer.Close()
	limiter, err := floodgate.NewLimiter(p, floodgate.WithName("hello"), floodgate.WithStore(s))
	if err != nil {
		log.Fatal(err)
	}
	perUser := httplimit.New(limiter, httplimit.WithKey(httplimit.ByHeader("X-User")), httplimit.WithDelay(*delay))
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello\n")) })
	log.Fatal(http.ListenAndServe(*addr, perUser.Handler(hello)))
}
