package envoyrls

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// MaxJSONBody is the largest body JSONHandler reads, in bytes; a larger
// one is refused with 413 Request Entity Too Large.
const MaxJSONBody = 1 << 20

// JSONHandler returns envoyproxy/ratelimit's HTTP form of the service,
// which it serves at POST /json (mount it there): the body is a
// RateLimitRequest in the proto3 JSON mapping, such as
//
//	{"domain": "edge", "descriptors": [{"entries": [{"key": "remote_address", "value": "10.0.0.1"}]}]}
//
// and the answer a RateLimitResponse in the same mapping
// (application/json), with status 200 when the overall code is OK and
// 429 Too Many Requests when it is OVER_LIMIT, as upstream answers.
//
// Other answers carry {"error": "..."} naming the problem (upstream sends
// only the status text):
//
//   - 405 Method Not Allowed for a method other than POST;
//   - 413 Request Entity Too Large for a body over MaxJSONBody;
//   - 400 Bad Request for a body that is not a RateLimitRequest in JSON
//     (unknown fields included) or that ShouldRateLimit refuses as
//     invalid (codes.InvalidArgument), as upstream does;
//   - 503 Service Unavailable when the store fails, where upstream
//     answers 400.
//
// The request's context is the call's: a client that hangs up cancels it.
func (s *Service) JSONHandler() http.Handler {
	return http.HandlerFunc(s.serveJSON)
}

func (s *Service) serveJSON(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.jsonError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: POST a RateLimitRequest")
		return
	}
	in := r.Body
	if in == nil {
		in = http.NoBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, in, MaxJSONBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			s.jsonError(w, http.StatusRequestEntityTooLarge, "body larger than 1 MiB")
			return
		}
		s.jsonError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		s.jsonError(w, http.StatusBadRequest, "the body is not a RateLimitRequest in JSON: "+err.Error())
		return
	}
	resp, err := s.ShouldRateLimit(r.Context(), &req)
	if err != nil {
		st, _ := status.FromError(err)
		code := http.StatusServiceUnavailable
		if st.Code() == codes.InvalidArgument {
			code = http.StatusBadRequest
		}
		writeJSONError(w, code, st.Message())
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil { // cannot happen with the service's responses
		writeJSONError(w, http.StatusInternalServerError, "encoding the response: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(out)
}

// jsonError answers a request the service never saw, counting it as an
// error.
func (s *Service) jsonError(w http.ResponseWriter, code int, msg string) {
	s.errs.Add(1)
	writeJSONError(w, code, msg)
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	body, _ := json.Marshal(struct {
		Error string `json:"error"`
	}{msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	w.Write(append(body, '\n'))
}
