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
//	d     := limiter.AllowN(ctx, key, cost)
//	admitted → RateLimit fields set, next handler called, d in the context
//	denied   → RateLimit fields, Retry-After, 429 with a problem detail
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
// All of them are set before the next handler runs, on the
// http.ResponseWriter the middleware received, which it passes on
// unwrapped: Flush, Hijack and http.ResponseController work untouched.
//
// # Keys
//
// A KeyFunc names a request's key. ClientIP.Key (the default), ByHeader,
// ByCookie, ByContext (a user ID that authentication middleware put in the
// context) and Global are provided, and FirstOf combines them: a signed-in
// user by ID, anyone else by address. A key function that finds no key
// returns an error wrapping ErrNoKey, answered 400.
package httplimit
