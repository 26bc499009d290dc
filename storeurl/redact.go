package storeurl

import (
	"net/url"
	"strings"
)

// mask is what takes a password's place, in Redact's URLs and in Open's
// errors: net/url's URL.Redacted writes the same.
const mask = "xxxxx"

// Redact returns rawURL with its password, as written, replaced by
// "xxxxx", for logs and messages: redis://user:xxxxx@host:6379/0. The
// user name, the hosts, a sentinel's master name and the parameters stay.
// A URL without a password, or with an empty one, comes back as it is, and
// so do the forms that have no user information (memory, file:PATH,
// file:///PATH, unix:///PATH).
//
// The password is where Open finds it: after the first ':' of what
// precedes the last '@' of the hosts (for redis-sentinel://, of what
// precedes the '@' before MASTER), percent-encoded or not. A password with
// an unescaped '/', which no parser accepts, is still hidden; one with an
// unescaped '?' or '#' is not, being read as the start of the parameters.
// Redact does not check that rawURL names a store.
func Redact(rawURL string) string {
	i, j := password(rawURL)
	if i == j {
		return rawURL
	}
	return rawURL[:i] + mask + rawURL[j:]
}

// password returns where rawURL's password is written, rawURL[i:j]; i == j
// when it has none.
func password(rawURL string) (i, j int) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok || strings.HasPrefix(rest, "/") {
		return 0, 0 // no user information: file:PATH, unix:///PATH
	}
	if k := strings.IndexAny(rest, "?#"); k >= 0 {
		rest = rest[:k]
	}
	info, ok := userinfo(rest)
	if ok && scheme == "redis-sentinel" {
		// USER:PASSWORD@MASTER or MASTER alone.
		k := strings.LastIndexByte(info, '@')
		info, ok = info[:max(k, 0)], k >= 0
	}
	colon := strings.IndexByte(info, ':')
	if !ok || colon < 0 {
		return 0, 0
	}
	start := len(scheme) + len("://")
	return start + colon + 1, start + len(info)
}

// userinfo returns the user information of rest, a URL after its "://"
// and before its parameters: what precedes the last '@' of the authority
// (up to the first '/'). When the authority has no '@' but a ':', as
// USER:PASS cut short by an unescaped '/' in the password, it is what
// precedes the last '@' of rest.
func userinfo(rest string) (string, bool) {
	authority, _, _ := strings.Cut(rest, "/")
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		return authority[:at], true
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 && strings.Contains(authority, ":") {
		return rest[:at], true
	}
	return "", false
}

// hidePassword returns err with every occurrence of rawURL's password, as
// written and unescaped, replaced by mask; err itself when there is none.
// The result still wraps err, for errors.Is.
func hidePassword(err error, rawURL string) error {
	i, j := password(rawURL)
	if i == j {
		return err
	}
	pw := rawURL[i:j]
	msg := strings.ReplaceAll(err.Error(), pw, mask)
	if u, uerr := url.PathUnescape(pw); uerr == nil && u != "" {
		msg = strings.ReplaceAll(msg, u, mask)
	}
	return redactedError{msg, err}
}

type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }
