package httplimit

import (
	"fmt"
	"net/http"

	"github.com/floodgate/floodgate/internal/frontend"
)

// A KeyFunc returns the rate-limit key of a request: who is asking, such as
// a client address, an API key or a user ID. Requests with equal keys share
// a limit.
//
// An error refuses the request (see Middleware): one wrapping ErrNoKey, for
// a request that carries no usable key, is answered 400 Bad Request; any
// other, a fault of the key function or the server, 500. FirstOf tries the
// next function on ErrNoKey.
//
// A key is only as trustworthy as what it is read from: a client chooses
// its own headers and cookies, so key on one only once something before the
// limiter has checked it (an API key looked up, a session verified), or
// the client will take a fresh key whenever it likes.
type KeyFunc func(*http.Request) (string, error)

// ErrNoKey is wrapped by the errors of KeyFuncs for a request that carries
// no usable key: the header, cookie or context value is missing or empty,
// or a header or cookie is longer than MaxKeyLen. It is grpclimit.ErrNoKey
// too.
var ErrNoKey = frontend.ErrNoKey

// MaxKeyLen is the longest header or cookie value that ByHeader and
// ByCookie take as a key. A longer one is not a key (ErrNoKey): a client
// would otherwise make the limiter's store hold keys of any size it likes.
const MaxKeyLen = frontend.MaxKeyLen

// ByHeader returns a KeyFunc keying requests on the value of the header
// name (its first value, if there are several). A request without the
// header, or with an empty value or one longer than MaxKeyLen, has no key
// (ErrNoKey). Mind the warning on KeyFunc: key on a header only once it is
// authenticated.
func ByHeader(name string) KeyFunc {
	name = http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		v := r.Header.Get(name)
		switch {
		case v == "":
			return "", fmt.Errorf("httplimit: no %s header: %w", name, ErrNoKey)
		case len(v) > MaxKeyLen:
			return "", fmt.Errorf("httplimit: %s header longer than %d bytes: %w", name, MaxKeyLen, ErrNoKey)
		}
		return v, nil
	}
}

// ByCookie returns a KeyFunc keying requests on the value of the cookie
// name. A request without the cookie, or with an empty value or one longer
// than MaxKeyLen, has no key (ErrNoKey). Mind the warning on KeyFunc: a
// session cookie makes a good key only once the session is verified.
func ByCookie(name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		c, err := r.Cookie(name)
		switch {
		case err != nil || c.Value == "":
			return "", fmt.Errorf("httplimit: no %s cookie: %w", name, ErrNoKey)
		case len(c.Value) > MaxKeyLen:
			return "", fmt.Errorf("httplimit: %s cookie longer than %d bytes: %w", name, MaxKeyLen, ErrNoKey)
		}
		return c.Value, nil
	}
}

// ByContext returns a KeyFunc keying requests on the value that an earlier
// middleware stored in the request's context under key, typically the
// authenticated user's ID: a string, an integer, or a fmt.Stringer. A
// request whose context holds no such value, or an empty one, has no key
// (ErrNoKey); a value of another type is an error (500).
func ByContext(key any) KeyFunc {
	return func(r *http.Request) (string, error) {
		return frontend.FromContext("httplimit", key, r.Context().Value(key))
	}
}

// FirstOf returns a KeyFunc trying fns in order and keying the request on
// the first key found: FirstOf(ByContext(userKey{}), ClientIP{}.Key) keys a
// signed-in user on their user ID and anyone else on their address. A
// function returning an error wrapping ErrNoKey passes the request on to
// the next; any other error is returned at once; when none has a key, the
// error wraps ErrNoKey.
//
// Keys found by different functions never collide: each is prefixed with
// the function's index and a colon ("0:alice", "1:192.0.2.1"), so that a
// user who names itself "192.0.2.1" does not share that address's limit.
func FirstOf(fns ...KeyFunc) KeyFunc {
	fs := make([]func(*http.Request) (string, error), len(fns))
	for i, f := range fns {
		fs[i] = f
	}
	return frontend.FirstOf("httplimit", fs)
}

// Global is a KeyFunc that gives every request the same key, "*": one limit
// shared by all clients, such as a cap on a costly endpoint's total rate.
func Global(*http.Request) (string, error) { return "*", nil }
