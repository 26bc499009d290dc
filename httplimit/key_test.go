package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/algo"

	"github.com/floodgate/floodgate"
)

type userKey struct{}

type userID int

func (u userID) String() string { return fmt.Sprintf("u%d", int(u)) }

func TestKeyFuncs(t *testing.T) {
	long := strings.Repeat("k", MaxKeyLen+1)
	withUser := func(v any) func(*http.Request) *http.Request {
		return func(r *http.Request) *http.Request {
			return r.WithContext(context.WithValue(r.Context(), userKey{}, v))
		}
	}
	header := func(k, v string) func(*http.Request) *http.Request {
		return func(r *http.Request) *http.Request { r.Header.Set(k, v); return r }
	}
	cookie := func(v string) func(*http.Request) *http.Request {
		return func(r *http.Request) *http.Request { r.AddCookie(&http.Cookie{Name: "session", Value: v}); return r }
	}
	ip := ClientIP{}.Key
	for _, tc := range []struct {
		name  string
		f     KeyFunc
		req   func(*http.Request) *http.Request
		want  string
		noKey bool // the error wraps ErrNoKey
		err   bool // another error
	}{
		{"address", ip, nil, "192.0.2.1", false, false},
		{"header", ByHeader("x-api-key"), header("X-Api-Key", "k1"), "k1", false, false},
		{"header missing", ByHeader("X-Api-Key"), nil, "", true, false},
		{"header empty", ByHeader("X-Api-Key"), header("X-Api-Key", ""), "", true, false},
		{"header too long", ByHeader("X-Api-Key"), header("X-Api-Key", long), "", true, false},
		{"cookie", ByCookie("session"), cookie("s1"), "s1", false, false},
		{"cookie missing", ByCookie("session"), nil, "", true, false},
		{"cookie too long", ByCookie("session"), cookie(long), "", true, false},
		{"context string", ByContext(userKey{}), withUser("alice"), "alice", false, false},
		{"context int", ByContext(userKey{}), withUser(42), "42", false, false},
		{"context int64", ByContext(userKey{}), withUser(int64(-7)), "-7", false, false},
		{"context uint64", ByContext(userKey{}), withUser(uint64(7)), "7", false, false},
		{"context Stringer", ByContext(userKey{}), withUser(userID(9)), "u9", false, false},
		{"context missing", ByContext(userKey{}), nil, "", true, false},
		{"context empty", ByContext(userKey{}), withUser(""), "", true, false},
		{"context other type", ByContext(userKey{}), withUser(3.5), "", false, true},
		{"global", Global, nil, "*", false, false},
		{"first: user", FirstOf(ByContext(userKey{}), ip), withUser("alice"), "0:alice", false, false},
		{"first: address", FirstOf(ByContext(userKey{}), ip), nil, "1:192.0.2.1", false, false},
		{"first: user named like an address", FirstOf(ByContext(userKey{}), ip), withUser("192.0.2.1"), "0:192.0.2.1", false, false},
		{"first: none", FirstOf(ByHeader("A"), ByCookie("b")), nil, "", true, false},
		{"first: empty", FirstOf(), nil, "", true, false},
		{"first: error stops", FirstOf(ByContext(userKey{}), ip), withUser(1.5), "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tc.req != nil {
				r = tc.req(r)
			}
			k, err := tc.f(r)
			switch {
			case tc.noKey && !errors.Is(err, ErrNoKey):
				t.Errorf("err = %v, want ErrNoKey", err)
			case tc.err && (err == nil || errors.Is(err, ErrNoKey)):
				t.Errorf("err = %v, want another error", err)
			case !tc.noKey && !tc.err && (err != nil || k != tc.want):
				t.Errorf("key %q, %v; want %q", k, err, tc.want)
			}
		})
	}
}

func TestKeyErrorStatus(t *testing.T) {
	p := algo.MustParsePolicy("fixed-window 5/1m")
	broken := errors.New("session store down")
	for _, tc := range []struct {
		name   string
		key    KeyFunc
		remote string
		status int
		logged bool
	}{
		{"no key", ByHeader("X-Api-Key"), "192.0.2.1:1", 400, false},
		{"broken key function", func(*http.Request) (string, error) { return "", broken }, "192.0.2.1:1", 500, true},
		{"unix socket", ClientIP{}.Key, "@", 500, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log, buf := newLogger()
			m := New(floodgate.Must(floodgate.NewLimiter(p)), WithKey(tc.key), WithLogger(log))
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = tc.remote
			req.Header.Set("Accept", "application/json")
			rec := httptest.NewRecorder()
			m.Handler(ok).ServeHTTP(rec, req)
			if rec.Code != tc.status || rec.Header().Get("Content-Type") != "application/problem+json" {
				t.Errorf("%d %s, want %d", rec.Code, rec.Header().Get("Content-Type"), tc.status)
			}
			if strings.Contains(rec.Body.String(), "session store") {
				t.Errorf("error text in the body: %s", rec.Body)
			}
			if got := strings.Contains(buf.String(), "key function failed"); got != tc.logged {
				t.Errorf("logged %v, want %v: %s", got, tc.logged, buf)
			}
			if s := m.Stats(); s.KeyErrors != 1 {
				t.Errorf("Stats %+v", s)
			}
		})
	}
	t.Run("custom handler", func(t *testing.T) {
		var got error
		m := New(floodgate.Must(floodgate.NewLimiter(p)), WithKey(ByHeader("X-Api-Key")), WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			got = err
			w.WriteHeader(http.StatusUnauthorized)
		}))
		rec := httptest.NewRecorder()
		m.Handler(ok).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if rec.Code != 401 || !errors.Is(got, ErrNoKey) {
			t.Errorf("%d %v", rec.Code, got)
		}
	})
}
