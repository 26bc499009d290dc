package frontend

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/floodgate/floodgate/internal/keyvalue"
)

// ErrNoKey is wrapped by the errors of key functions for a request that
// carries no usable key. httplimit.ErrNoKey and grpclimit.ErrNoKey are it.
var ErrNoKey = errors.New("floodgate: no rate-limit key in the request")

// MaxKeyLen is the longest header, cookie or metadata value taken as a
// key. A longer one is not a key (ErrNoKey): a client would otherwise make
// the limiter's store hold keys of any size it likes.
const MaxKeyLen = 256

// FirstOf returns a key function trying fns in order: the first key found
// wins, prefixed with its function's index and a colon ("0:alice",
// "1:192.0.2.1") so that keys found by different functions never collide.
// ErrNoKey passes the request on to the next function; any other error
// is returned at once; when none has a key, the error wraps ErrNoKey.
// pkg prefixes the error of an empty fns.
func FirstOf[R any](pkg string, fns []func(R) (string, error)) func(R) (string, error) {
	return func(r R) (string, error) {
		var errs []error
		for i, f := range fns {
			k, err := f(r)
			if err == nil {
				return strconv.Itoa(i) + ":" + k, nil
			}
			if !errors.Is(err, ErrNoKey) {
				return "", err
			}
			errs = append(errs, err)
		}
		if len(errs) == 0 {
			return "", fmt.Errorf("%s: FirstOf of no KeyFunc: %w", pkg, ErrNoKey)
		}
		return "", errors.Join(errs...)
	}
}

// FromContext returns the key stored in a request's context as v under
// key (a string, an integer or a fmt.Stringer; see package keyvalue). An
// absent or empty value has no key (ErrNoKey); a value of another type is
// an error. pkg prefixes the errors.
func FromContext(pkg string, key, v any) (string, error) {
	s, err := keyvalue.String(v)
	if err != nil {
		return "", fmt.Errorf("%s: context value %v %w", pkg, key, err)
	}
	if s == "" {
		return "", fmt.Errorf("%s: no context value %v: %w", pkg, key, ErrNoKey)
	}
	return s, nil
}
