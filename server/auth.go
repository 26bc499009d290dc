package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// authorized reports whether r carries one of l's tokens, or l has none;
// if not, it answers 401.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, l *live) bool {
	if len(l.tokens) == 0 {
		return true
	}
	msg := "this server wants Authorization: Bearer TOKEN"
	if token, ok := bearer(r.Header.Get("Authorization")); ok {
		if l.accepts(token) {
			return true
		}
		msg = "the bearer token is not valid"
		w.Header().Set("WWW-Authenticate", `Bearer realm="floodgate", error="invalid_token"`)
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="floodgate"`)
	}
	writeError(w, http.StatusUnauthorized, msg)
	return false
}

// bearer returns the token of an Authorization field's value
// "Bearer TOKEN" (the scheme in any case).
func bearer(field string) (string, bool) {
	scheme, token, ok := strings.Cut(field, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// accepts reports whether token is one of l's, comparing its hash with
// every accepted one in constant time.
func (l *live) accepts(token string) bool {
	h := sha256.Sum256([]byte(token))
	ok := 0
	for i := range l.tokens {
		ok |= subtle.ConstantTimeCompare(h[:], l.tokens[i][:])
	}
	return ok == 1
}
