package floodgate

import (
	"fmt"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// Decision is the outcome of one request on one key.
type Decision struct {
	// Allowed reports whether the request was admitted. In dry-run mode
	// it is always true; DryRun tells a request that would have been
	// denied.
	Allowed bool
	// DryRun is true when the limiter is in dry-run mode and the request
	// would have been denied: it was admitted anyway and consumed nothing,
	// and the other fields describe the denial.
	DryRun bool
	// Remaining is how many more units the key would admit now.
	Remaining int64
	// RetryAfter is 0 for an admitted request; for a denied one, the
	// shortest wait after which the same request would be admitted if
	// nothing else happened meanwhile, or algo.Never. Waiting exactly
	// RetryAfter always suffices: durations are rounded up to the
	// nanosecond.
	RetryAfter time.Duration
	// ResetAfter is the time until the key is back to its initial state
	// (full bucket, empty window or log) if nothing else happens.
	ResetAfter time.Duration

	policy *algo.Policy // the limiter's: a pointer keeps a Decision in registers
}

// Policy returns the policy that decided; the zero Policy for the zero
// Decision.
func (d Decision) Policy() algo.Policy {
	if d.policy == nil {
		return algo.Policy{}
	}
	return *d.policy
}

// String describes d in one line, for logs and %v: "allowed, remaining
// 19, reset in 3s (token-bucket 100/1m burst=20)", "denied, retry in
// 600ms, reset in 1m0s (...)", or for a dry-run denial "allowed (dry run:
// denied), retry in ...". A cost that can never pass says "retry never".
func (d Decision) String() string {
	var b strings.Builder
	switch {
	case d.DryRun:
		b.WriteString("allowed (dry run: denied)")
	case d.Allowed:
		fmt.Fprintf(&b, "allowed, remaining %d", d.Remaining)
	default:
		b.WriteString("denied")
	}
	switch {
	case d.Allowed && !d.DryRun:
	case d.RetryAfter == algo.Never:
		b.WriteString(", retry never")
	default:
		fmt.Fprintf(&b, ", retry in %v", d.RetryAfter)
	}
	fmt.Fprintf(&b, ", reset in %v", d.ResetAfter)
	if d.policy != nil {
		fmt.Fprintf(&b, " (%v)", *d.policy)
	}
	return b.String()
}
