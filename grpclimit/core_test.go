package grpclimit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestWithCostWithName: the options grpclimit had lost to httplimit
// (issue 30) are back, over a real gRPC server: WithCost makes each call
// cost n, WithName names the limit in QuotaFailure details.
func TestWithCostWithName(t *testing.T) {
	l := newLimiter(t, "fixed-window 10/1m")
	c, _ := start(t, New(l, WithCost(4), WithName("calls"), WithQuotaFailure()))
	for k, want := range []codes.Code{codes.NotFound, codes.NotFound, codes.ResourceExhausted} {
		err := check(c)
		if got := status.Code(err); got != want && !(want == codes.NotFound && err == nil) {
			t.Fatalf("call %d costing 4 of 10: %v, want %v", k+1, err, want)
		}
		if want != codes.ResourceExhausted {
			continue
		}
		var qf *errdetails.QuotaFailure
		for _, d := range status.Convert(err).Details() {
			if q, ok := d.(*errdetails.QuotaFailure); ok {
				qf = q
			}
		}
		if qf == nil || len(qf.Violations) != 1 || qf.Violations[0].QuotaId != "calls" {
			t.Errorf("QuotaFailure %v, want the limit named calls", qf)
		}
	}
}

// TestKeyErrorsNameGrpclimit: the key helpers' errors say grpclimit, and
// ErrNoKey says neither front-end's name (it said "httplimit:").
func TestKeyErrorsNameGrpclimit(t *testing.T) {
	_, err := FirstOf(ByContext(struct{}{}))(context.Background(), "/m")
	if !errors.Is(err, ErrNoKey) || !strings.HasPrefix(err.Error(), "grpclimit: ") || strings.Contains(ErrNoKey.Error(), "httplimit") {
		t.Errorf("FirstOf(ByContext) of a bare context: %v; ErrNoKey %q", err, ErrNoKey)
	}
}
