// Package httplimit is floodgate's middleware for net/http servers: it
// limits the rate of the requests that reach a handler, per client, per
// user or per anything a request carries, and tells clients where they
// stand in the standard header fields.
//
// # The model
//
// A Middleware holds one floodgate.Limiter (New) or several checked all or
// nothing (NewAll). For each request it finds a key (who is asking) and a
// cost (1 by default), asks the limiter, and then either calls the next
// handler or answers the denial itself:
//
//	key   := the request's client address  (or a header, cookie, user ID; see KeyFunc)
//	cost  := 1                             (or bytes, a query's cost; see WithCostFunc)
//	d     := limiter.AllowN(ctx, key, cost)  (WithDelay: limiter.Delay, which waits its turn)
//	admitted → RateLimit fields set, next handler called, d in the context
//	denied   → RateLimit fields, Retry-After, 429 with a problem detail
//	cost above the burst → 413, no Retry-After: it never fits
//
// The policy (how many units per period, by which algorithm), the store
// (this process's memory or Redis) and the failure mode (what to do while
// Redis is down) are the limiter's; see package floodgate. The middleware
// adds what HTTP needs: keys, header fields, response bodies, and a
// documented answer to every failure (see Middleware).
//
// # Trusted proxies: read this before keying on addresses
//
// X-Forwarded-For and Forwarded are written by whoever sends the request.
// Unless the peer that connected to your server is your own proxy, the
// address in them is whatever the client chose: a client that puts a new
// address there on each request is never limited, and one that puts your
// other clients' addresses there spends their quota. Most rate-limiting
// middleware has shipped this hole at least once.
//
// So by default the client address is the peer's (RemoteAddr) and no
// header is believed. Behind reverse proxies, list their networks in
// ClientIP.TrustedProxies: only a request from one of them has its header
// read, and then from the right, past your own proxies' addresses, to the
// first address that is not one of theirs (the client as your outermost
// proxy saw it), never further left. Name in
// ClientIP.Header the header your proxies actually write, and have them
// append to it or replace it: a header they pass through untouched is the
// client's.
//
//	ip := httplimit.ClientIP{
//		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
//		Header:         httplimit.XForwardedFor,
//	}
//	m := httplimit.New(limiter, httplimit.WithKey(ip.Key))
//
// IPv6 clients are grouped by /64 (ClientIP.IPv6Bits), since one client
// usually holds a whole /64 and can pick any address in it.
//
// # Header fields
//
// Every decided response carries the fields of the IETF draft
// draft-ietf-httpapi-ratelimit-headers, as structured fields: the policies,
// and the client's standing under each,
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=30
//
// where q units are allowed per w seconds, r units are available now, and t
// is the number of seconds within which the client should use no more than
// r: for an admitted request the time until its quota is whole again, for
// a denied one the time until a retry would be admitted. A denial adds
// Retry-After, in whole seconds rounded up, so that a client that waits
// that long is never early. LegacyHeaders adds X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset (in seconds). No partition
// key (pk) is sent: keys are client addresses and user IDs, which the
// draft advises against disclosing; WithHeaders(NoHeaders) sends no field
// but Retry-After.
//
// Rules of the fields:
//   - Each limit is one item of each List. Middlewares stacked on one
//     route add their items to the fields, each its own; name their
//     limits apart (WithName).
//   - A dry-run limit (floodgate.WithDryRun) is not advertised: clients
//     would slow down for a limit that is not enforced.
//   - A name has one form everywhere a client sees it: each character a
//     structured-field String cannot hold (a control, non-ASCII) becomes
//     '_', in the fields and in a denial's problem detail alike.
//   - A request whose cost is above a limit's burst can never be
//     admitted: it is answered 413 Content Too Large, without Retry-After
//     or rate-limit fields.
//
// All of them are set before the next handler runs, on the
// http.ResponseWriter the middleware received, which it passes on
// unwrapped: Flush, Hijack and http.ResponseController work untouched.
//
// # Shaping: delaying instead of refusing
//
// WithDelay(maxWait) makes the middleware shape: a request over the rate
// waits its exact turn, first come first served, and is refused only when
// its turn is more than maxWait away or the key already has the limiter's
// maximum of waiting requests. The queue is bounded: a bucket holds
// only what fits within maxWait, and with a window or log policy a key
// holds at most the requests the policy admits within maxWait (LIMIT for
// each PERIOD begun), as nginx's burst bounds limit_req's queue;
// floodgate.WithMaxQueue sets another bound. With a bucket
// policy each waiting request holds its units in the store from the moment
// it arrives (floodgate.Limiter.Delay), so the queue is exact and shared
// by every process on the store. A client that disconnects while it waits
// gives them back only if no request has queued behind it; otherwise its
// turn goes unused, since the requests after it keep theirs and a new one
// would be served beside them (floodgate.Reservation.Cancel).
//
// This is nginx's limit_req. nginx keeps, per key, the excess: the
// requests beyond the rate, drained at the rate, a key's first request
// having none. A request whose excess would pass burst is refused; one
// whose excess passes delay (0 by default, "nodelay" being delay=burst)
// waits until the excess above delay has drained. The excess is the level
// of a leaky bucket drained at the rate, the request itself counted, minus
// one: "excess at most D" is "the bucket of capacity D+1 holds it", and
// the wait of an excess above D is floodgate's wait for that bucket. So
// these decide the same, request for request:
//
//	nginx (rate=Rr/s, or Rr/m with 1m)   floodgate policy               middleware option
//	limit_req zone=z burst=B             leaky-bucket R/1s capacity=1   WithDelay(B × 1s/R)
//	limit_req zone=z burst=B delay=D     leaky-bucket R/1s capacity=D+1 WithDelay((B-D) × 1s/R)
//	limit_req zone=z burst=B nodelay     leaky-bucket R/1s capacity=B+1 none: refuse at once
//	limit_req zone=z                     leaky-bucket R/1s capacity=1   none
//
// nginx's two-stage example, rate=5r/s with burst=12 delay=8, is
// leaky-bucket 5/1s capacity=9 with WithDelay(800*time.Millisecond): of 15
// requests arriving together, 9 are served at once, 4 after 200, 400, 600
// and 800ms, and 2 are refused (the tests hold the middleware to nginx's
// accounting on this example and others). A token-bucket policy with
// burst=D+1 decides the same as the leaky bucket. What differs: nginx
// counts in milliseconds and thousandths of a request, floodgate exactly
// (in nanoseconds); nginx refuses with 503, the middleware with 429 and
// Retry-After (WithStatus changes it); and the window and log policies,
// which cannot hold units for later, queue their waiters in the Limiter
// instead of the store (see floodgate.Limiter.WaitN).
//
// A client that goes away while its request waits is seen by net/http,
// which cancels the request's context. Over HTTP/1.x net/http watches the
// connection only once the request's body is read to its end, so the
// middleware reads a body of up to 64 KiB ahead, in the background, and
// puts it back for the handler. Not seen while waiting: a longer body,
// and one announced with "Expect: 100-continue" (its client sends it only
// when asked); such a request is served when its turn comes.
//
// The header fields of a delayed request are written when its wait is
// over, and say where the key stands then: r=0, since the request was
// admitted at the first instant it fitted, and t the seconds until the
// key's quota is whole again, the requests queued behind it included. A
// request refused because its wait would pass maxWait gets r=0 and, in t
// and Retry-After, the time after which a retry would be admitted within
// maxWait. WithDelay is for a Middleware made by New; the handler waits on
// the request's goroutine, and a waiting request costs its connection and
// that goroutine (the bench module measures it).
//
// # One core with grpclimit
//
// Package grpclimit, the gRPC interceptors, is built on the same core: the
// same options (WithKey, WithCost, WithCostFunc, WithName, WithSkip,
// WithOnLimited, WithLogger, WithDelay), the same key helpers, the same
// ErrNoKey, the same counts (Stats). A feature of one is a feature of both.
//
// # Keys
//
// A KeyFunc names a request's key. ClientIP.Key (the default), ByHeader,
// ByCookie, ByContext (a user ID that authentication middleware put in the
// context) and Global are provided, and FirstOf combines them: a signed-in
// user by ID, anyone else by address. A key function that finds no key
// returns an error wrapping ErrNoKey, answered 400.
package httplimit
