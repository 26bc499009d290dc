package floodgate

import (
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
