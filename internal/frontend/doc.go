// Package frontend is the core shared by floodgate's front-ends, package
// httplimit (net/http middleware) and package grpclimit (gRPC
// interceptors), so that a feature added to one is in both.
//
// # What it holds
//
//   - The options both take: key and cost functions, a name, skips, the
//     WithOnLimited hook, the logger, the maximum delay (Config).
//   - Limits and their names: "default" for a limiter named by its
//     policy, "-2", "-3" for a name already taken (LimitName).
//   - Deciding a request on its limits: one by Limiter.Delay, several all
//     or nothing by floodgate.AllowAll, into a context that carries the
//     decision (Decided), and the limit that binds (Binding).
//   - The counts both report (Counts, Stats), each on its own cache line.
//   - The key helpers written once over any request type: ErrNoKey,
//     MaxKeyLen, FirstOf, FromContext.
//
// # What it does not
//
// Each front-end keeps what its protocol needs: HTTP's header fields,
// problem details and client addresses; gRPC's methods, status codes and
// error details.
package frontend
