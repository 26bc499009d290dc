package storetest

import (
	"bufio"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algo"
)

//go:embed testdata/vectors.txt
var vectorsText string

// A Vector is one policy and a trace of events on a few keys, each with the
// decision every store must return for it, computed by package algo and
// checked against floodgate's independent reference model.
type Vector struct {
	Policy algo.Policy
	Steps  []Step
}

// Step is one event of a Vector and its expected decision.
type Step struct {
	Line int    // in testdata/vectors.txt
	T    int64  // nanoseconds since the Unix epoch
	Key  string // no spaces
	N    int64
	Want algo.Decision
	// WantErr is set when the event's cost exceeds the burst: the store
	// must return an error wrapping algo.ErrCostExceedsBurst.
	WantErr bool
}

// Vectors returns the shared golden vectors. The file format, one item a
// line, '#' starting a comment:
//
//	policy POLICY
//	T KEY N -> ALLOWED REMAINING RETRY_AFTER RESET_AFTER
//
// with times and durations in nanoseconds, ALLOWED 0 or 1, and RETRY_AFTER
// "never" for a cost above the burst.
func Vectors() ([]Vector, error) { return parseVectors(vectorsText) }

func parseVectors(text string) ([]Vector, error) {
	var out []Vector
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		if rest, ok := strings.CutPrefix(s, "policy "); ok {
			p, err := algo.ParsePolicy(rest)
			if err != nil {
				return nil, fmt.Errorf("vectors line %d: %w", line, err)
			}
			out = append(out, Vector{Policy: p})
			continue
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("vectors line %d: event before any policy", line)
		}
		f := strings.Fields(s)
		if len(f) != 8 || f[3] != "->" {
			return nil, fmt.Errorf("vectors line %d: want T KEY N -> ALLOWED REMAINING RETRY RESET, got %q", line, s)
		}
		st := Step{Line: line, Key: f[1]}
		var err error
		num := func(s string) int64 {
			v, e := strconv.ParseInt(s, 10, 64)
			if e != nil && err == nil {
				err = e
			}
			return v
		}
		st.T, st.N = num(f[0]), num(f[2])
		st.Want.Allowed = num(f[4]) == 1
		st.Want.Remaining = num(f[5])
		if f[6] == "never" {
			st.Want.RetryAfter, st.WantErr = algo.Never, true
		} else {
			st.Want.RetryAfter = time.Duration(num(f[6]))
		}
		st.Want.ResetAfter = time.Duration(num(f[7]))
		if err != nil {
			return nil, fmt.Errorf("vectors line %d: %w", line, err)
		}
		v := &out[len(out)-1]
		v.Steps = append(v.Steps, st)
	}
	return out, sc.Err()
}

// formatStep writes a step in the vectors' syntax.
func formatStep(st Step) string {
	retry := strconv.FormatInt(int64(st.Want.RetryAfter), 10)
	if st.WantErr {
		retry = "never"
	}
	allowed := 0
	if st.Want.Allowed {
		allowed = 1
	}
	return fmt.Sprintf("%d %s %d -> %d %d %s %d", st.T, st.Key, st.N, allowed, st.Want.Remaining, retry, int64(st.Want.ResetAfter))
}
