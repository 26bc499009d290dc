// Package grpclimit is floodgate's rate limiting for gRPC servers: unary
// and stream server interceptors that decide each call with a
// floodgate.Limiter before its handler runs.
//
// # The model
//
// An Interceptor holds one limit (New) or several (NewAll), each applying
// to every method or to some (a method, "/pkg.Service/Method", or a whole
// service, "/pkg.Service/"). For each call it finds a key (who is calling:
// by default the peer's address), a cost (1 by default), and asks the
// limits that apply to the method, all or nothing:
//
//	admitted → the handler runs, with the decision in its context (DecisionFrom)
//	denied   → codes.ResourceExhausted, with an errdetails.RetryInfo saying
//	           when a retry would be admitted
//	cost above the burst → codes.InvalidArgument, no RetryInfo: it never fits
//
// With WithDelay a call over the rate waits its exact turn instead, up to
// a maximum delay, and is refused only past it or when the key's queue
// is full: nginx's limit_req with burst and delay (package httplimit's
// doc, "Shaping", has the equivalents). The queue is bounded by default
// (floodgate.Limiter.Delay). A call cancelled while it waits gives its units back if
// no call has queued behind it (floodgate.Reservation.Cancel).
//
// # Options shared with httplimit
//
// Both front-ends are built on one core, so they take the same options:
//   - WithKey, WithCost, WithCostFunc: who is calling, and what a call costs.
//   - WithName: the limit's name (for New; NewAll takes Limit.Name).
//   - WithSkip, WithOnLimited, WithLogger, WithDelay.
//   - ByContext, FirstOf and Global, and ErrNoKey, are the same helpers.
//
// A stream is decided once, when it opens. The limiter's store and failure
// mode (package failsafe) decide what happens while a shared store is
// down: an error that denies is codes.Unavailable, with a RetryInfo.
//
// # Trusted proxies
//
// The default key is the address of the peer that connected. Behind a
// proxy such as Envoy, which passes the client's address in the
// x-forwarded-for metadata, key with ByPeer and an httplimit.ClientIP that
// lists the proxies' networks in TrustedProxies: the metadata is believed
// only when the peer is one of them, and read from the right, past the
// trusted proxies. A client reaching the server directly can put anything
// in its metadata; believed blindly, it would give itself a fresh key on
// every call. See httplimit.ClientIP for the rules, which are the same.
package grpclimit
