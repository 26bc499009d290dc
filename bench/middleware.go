package bench

// MiddlewarePeers names what BenchmarkMiddleware compares, for the notes
// of cmd/ratios. The bare handler and floodgate's decision alone are there
// to measure the middleware's own overhead (see OverheadRatio).
var MiddlewarePeers = []struct{ Name, Note string }{
	{MiddlewareBare, "the handler alone, without middleware: what the others add to"},
	{MiddlewareDecide, "floodgate's decision alone (Limiter.Allow), no HTTP"},
	{MiddlewareCore, "the least middleware around floodgate: Allow on a fixed key, RateLimit-Policy and RateLimit set, next called"},
	{"httprate", "github.com/go-chi/httprate LimitBy keyed as its LimitByIP (RemoteAddr, IPv6 by /64; X-RateLimit-* headers), 1e9 per hour"},
	{"golimiter-http", "github.com/sethvargo/go-limiter httplimit with IPKeyFunc() (RemoteAddr), memorystore 1e8 tokens per 1e16 ns"},
}

// MiddlewareBase, MiddlewareBare and MiddlewareCore are the peers of
// OverheadRatio; MiddlewareDecide is floodgate's decision alone, without
// HTTP.
const (
	MiddlewareBase   = "floodgate"
	MiddlewareBare   = "bare"
	MiddlewareCore   = "floodgate-core"
	MiddlewareDecide = "floodgate-decide"
)

// OverheadRatio is the ratio that floodgate's middleware is held to (at
// most 1.5): what it adds to a bare handler, over what the least
// middleware adds, a decision and the writing of its header fields. mw,
// bare and core are the ns/op of MiddlewareBase, MiddlewareBare and
// MiddlewareCore in one scenario of BenchmarkMiddleware.
func OverheadRatio(mw, bare, core float64) float64 { return (mw - bare) / (core - bare) }

// DelayedPeers names what BenchmarkDelayed compares, for the notes of
// cmd/ratios: requests waiting their turn in floodgate's middleware
// (httplimit.WithDelay), and the same requests held in the handler, whose
// HTTP costs are the same; the difference is the middleware's.
var DelayedPeers = []struct{ Name, Note string }{
	{DelayedHeld, "the same requests held in the handler (blocked on a channel), no middleware: what waiting in floodgate's adds to"},
}

// DelayedHeld is the peer of BenchmarkDelayed that holds requests in the
// handler instead of the middleware.
const DelayedHeld = "held-in-handler"
