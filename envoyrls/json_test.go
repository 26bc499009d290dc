package envoyrls

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
)

func TestJSONHandler(t *testing.T) {
	s, _ := newService(t, `
domain: demo
descriptors:
  - key: one_per_minute
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: two_per_minute
    rate_limit: {unit: minute, requests_per_unit: 2}
`)
	srv := httptest.NewServer(s.JSONHandler())
	defer srv.Close()
	post := func(t *testing.T, body string) (int, http.Header, string) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/json", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, string(b)
	}
	decode := func(t *testing.T, body string) string {
		t.Helper()
		var r rlsv3.RateLimitResponse
		if err := protojson.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("the answer %q is not a RateLimitResponse: %v", body, err)
		}
		return summary(&r)
	}

	// upstream's README: curl -XPOST --data '{"domain": ..., "descriptors": [...]}' .../json
	code, h, body := post(t, `{"domain": "demo", "descriptors": [{"entries": [{"key": "one_per_minute", "value": "something"}]}]}`)
	if code != http.StatusOK || h.Get("Content-Type") != "application/json" || decode(t, body) != "OK: OK 1/MINUTE t=1m0s" {
		t.Errorf("first: %d %s %s", code, h.Get("Content-Type"), body)
	}
	// The README's answer: 429 and the statuses in order; snake_case
	// field names are accepted too, as protojson accepts both.
	code, _, body = post(t, `{"domain": "demo", "hits_addend": 1, "descriptors": [
		{"entries": [{"key": "one_per_minute", "value": "something"}]},
		{"entries": [{"key": "two_per_minute", "value": "something"}]}]}`)
	if got, want := decode(t, body), "OVER_LIMIT: OVER_LIMIT 1/MINUTE t=1m0s | OK 2/MINUTE r=1 t=1m0s"; code != http.StatusTooManyRequests || got != want {
		t.Errorf("second: %d %s, want 429 %s", code, got, want)
	}
	// The JSON shape of the README: camelCase names, enums by name.
	var shape struct {
		OverallCode string `json:"overallCode"`
		Statuses    []struct {
			Code         string `json:"code"`
			CurrentLimit struct {
				RequestsPerUnit int    `json:"requestsPerUnit"`
				Unit            string `json:"unit"`
			} `json:"currentLimit"`
			LimitRemaining     int    `json:"limitRemaining"`
			DurationUntilReset string `json:"durationUntilReset"`
		} `json:"statuses"`
	}
	if err := json.Unmarshal([]byte(body), &shape); err != nil {
		t.Fatal(err)
	}
	if s0, s1 := shape.Statuses[0], shape.Statuses[1]; shape.OverallCode != "OVER_LIMIT" || s0.Code != "OVER_LIMIT" ||
		s0.CurrentLimit.RequestsPerUnit != 1 || s0.CurrentLimit.Unit != "MINUTE" || s1.LimitRemaining != 1 || s1.DurationUntilReset != "60s" {
		t.Errorf("JSON shape: %s", body)
	}

	for _, tc := range []struct {
		name, method, body string
		code               int
		want               string
	}{
		{"GET", http.MethodGet, "", http.StatusMethodNotAllowed, "method GET not allowed"},
		{"not JSON", http.MethodPost, "domain=demo", http.StatusBadRequest, "the body is not a RateLimitRequest in JSON"},
		{"unknown field", http.MethodPost, `{"domain": "demo", "descriptor": []}`, http.StatusBadRequest, "unknown field"},
		{"wrong type", http.MethodPost, `{"domain": 5}`, http.StatusBadRequest, "the body is not a RateLimitRequest"},
		{"empty body", http.MethodPost, "", http.StatusBadRequest, "the body is not a RateLimitRequest"},
		{"empty object", http.MethodPost, "{}", http.StatusBadRequest, "rate limit domain must not be empty"},
		{"empty domain", http.MethodPost, `{"descriptors": [{"entries": [{"key": "k"}]}]}`, http.StatusBadRequest, "rate limit domain must not be empty"},
		{"no descriptor", http.MethodPost, `{"domain": "demo"}`, http.StatusBadRequest, "rate limit descriptor list must not be empty"},
		{"negative hits", http.MethodPost, `{"domain": "demo", "descriptors": [{"entries": [{"key": "k"}], "hitsAddend": 1, "isNegativeHits": true}]}`, http.StatusBadRequest, "is_negative_hits"},
		{"too large", http.MethodPost, `{"domain": "` + strings.Repeat("x", MaxJSONBody) + `"}`, http.StatusRequestEntityTooLarge, "body larger than 1 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+"/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e struct{ Error string }
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatalf("the error body is not JSON: %v", err)
			}
			if resp.StatusCode != tc.code || !strings.Contains(e.Error, tc.want) || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, e.Error, tc.code, tc.want)
			}
			if tc.method == http.MethodGet && resp.Header.Get("Allow") != http.MethodPost {
				t.Errorf("Allow: %q", resp.Header.Get("Allow"))
			}
		})
	}
	if st := s.Stats(); st.OK != 1 || st.OverLimit != 1 || st.Errors != 10 {
		t.Errorf("Stats() = %+v", st)
	}
}

// A failing store is 503, where upstream says 400.
func TestJSONHandlerStoreFailure(t *testing.T) {
	s := NewService(mustParse(t, basics), brokenStore{err: errors.New("down")})
	rec := httptest.NewRecorder()
	s.JSONHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/json",
		strings.NewReader(`{"domain": "d", "descriptors": [{"entries": [{"key": "a", "value": "x"}]}]}`)))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "rate limit store: down") {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}
