package algo_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in        string
		alg       algo.Algorithm
		limit     int64
		period    time.Duration
		burst     int64
		canonical string
	}{
		{"token-bucket 3/1s burst=5", algo.TokenBucket, 3, time.Second, 5, "token-bucket 3/1s burst=5"},
		{"token-bucket 7/2 burst=7", algo.TokenBucket, 7, 2 * time.Second, 7, "token-bucket 7/2s"},
		{"token-bucket 10/1m", algo.TokenBucket, 10, time.Minute, 10, "token-bucket 10/1m"},
		{"leaky-bucket 1/1h capacity=20", algo.LeakyBucket, 1, time.Hour, 20, "leaky-bucket 1/1h capacity=20"},
		{"leaky-bucket 1/2s capacity=1", algo.LeakyBucket, 1, 2 * time.Second, 1, "leaky-bucket 1/2s"},
		{"sliding-log 2/10", algo.SlidingLog, 2, 10 * time.Second, 2, "sliding-log 2/10s"},
		{"sliding-window 3/500ms", algo.SlidingWindow, 3, 500 * time.Millisecond, 3, "sliding-window 3/500ms"},
		{"fixed-window 100/60", algo.FixedWindow, 100, time.Minute, 100, "fixed-window 100/1m"},
		{"fixed-window 5/0.5", algo.FixedWindow, 5, 500 * time.Millisecond, 5, "fixed-window 5/500ms"},
		{"fixed-window 5/1.5s", algo.FixedWindow, 5, 1500 * time.Millisecond, 5, "fixed-window 5/1500ms"},
		{"fixed-window 5/1h30m", algo.FixedWindow, 5, 90 * time.Minute, 5, "fixed-window 5/90m"},
		{"fixed-window 1/0.000000001", algo.FixedWindow, 1, 1, 1, "fixed-window 1/1ns"},
		{"fixed-window 1/7us", algo.FixedWindow, 1, 7 * time.Microsecond, 1, "fixed-window 1/7us"},
		{"  sliding-log\t5/60  ", algo.SlidingLog, 5, time.Minute, 5, "sliding-log 5/1m"},
		{"token-bucket 1000000000/8784h", algo.TokenBucket, 1e9, algo.MaxPeriod, 1e9, "token-bucket 1000000000/8784h"},
		{"token-bucket 1/1h burst=876600", algo.TokenBucket, 1, time.Hour, 876600, "token-bucket 1/1h burst=876600"},
		{"token-bucket 1250000000/1s burst=4294967296", algo.TokenBucket, 1_250_000_000, time.Second, 1 << 32, "token-bucket 1250000000/1s burst=4294967296"},
		{"fixed-window 1000000000000000/8784h", algo.FixedWindow, algo.MaxLimit, algo.MaxPeriod, algo.MaxLimit, "fixed-window 1000000000000000/8784h"},
		{"leaky-bucket 1/1ns capacity=1000000000000000", algo.LeakyBucket, 1, 1, algo.MaxLimit, "leaky-bucket 1/1ns capacity=1000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := algo.ParsePolicy(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if p.Algorithm() != tt.alg || p.Limit() != tt.limit || p.Period() != tt.period || p.Burst() != tt.burst {
				t.Errorf("got %v %d/%v burst %d, want %v %d/%v burst %d",
					p.Algorithm(), p.Limit(), p.Period(), p.Burst(), tt.alg, tt.limit, tt.period, tt.burst)
			}
			if got := p.String(); got != tt.canonical {
				t.Errorf("String() = %q, want %q", got, tt.canonical)
			}
			q, err := algo.ParsePolicy(p.String())
			if err != nil || q != p {
				t.Errorf("canonical form %q parses to %v, %v; want the same policy", p.String(), q, err)
			}
		})
	}
}

func TestParsePolicyErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "want ALGORITHM LIMIT/PERIOD"},
		{"token-bucket", "want ALGORITHM LIMIT/PERIOD"},
		{"gcra 1/1s", `unknown algorithm "gcra"`},
		{"Token-Bucket 1/1s", `unknown algorithm "Token-Bucket"`},
		{"token-bucket 5", `rate "5" is not LIMIT/PERIOD`},
		{"token-bucket /1s", `limit "" is not a whole number`},
		{"token-bucket x/1s", `limit "x" is not a whole number`},
		{"token-bucket -1/1s", `limit "-1" is not a whole number`},
		{"token-bucket +1/1s", `limit "+1" is not a whole number`},
		{"token-bucket 1.5/1s", `limit "1.5" is not a whole number`},
		{"token-bucket 0/1s", "limit 0 is less than 1"},
		{"token-bucket 1000000000000001/1s", "limit 1000000000000001 is more than 1000000000000000"},
		{"token-bucket 1/1s burst=1000000000000001", "burst 1000000000000001 is more than 1000000000000000"},
		{"leaky-bucket 1/1s capacity=1000000000000001", "capacity 1000000000000001 is more than 1000000000000000"},
		{"sliding-log 1000000000000001/1s", "limit 1000000000000001 is more than 1000000000000000"},
		{"token-bucket 99999999999999999999999/1s", "is more than 1000000000000000"},
		{"token-bucket 1/", `period "" is not a Go duration`},
		{"token-bucket 1/0", "period 0 is not positive"},
		{"token-bucket 1/0s", "period 0s is not positive"},
		{"token-bucket 1/-1s", "period -1s is not positive"},
		{"token-bucket 1/1d", "the largest unit is h: 1d is 24h"},
		{"token-bucket 1/fortnight", `period "fortnight" is not a Go duration`},
		{"token-bucket 1/1.2.3", "is not a number of seconds with at most nine decimals"},
		{"token-bucket 1/0.0000000001", "is not a number of seconds with at most nine decimals"},
		{"token-bucket 1/.", "is not a number of seconds"},
		{"token-bucket 1/8785h", "period 8785h is longer than 366 days"},
		{"token-bucket 1/31622401", "period 31622401 is longer than 366 days"},
		{"token-bucket 1/99999999999", "period 99999999999 is longer than 366 days"},
		{"token-bucket 1/1s/2", `period "1s/2" is not a Go duration`},
		{"token-bucket 1/1s burst", `option "burst" is not NAME=VALUE`},
		{"token-bucket 1/1s burst=0", "burst 0 is less than 1"},
		{"token-bucket 1/1s burst=-3", `burst "-3" is not a whole number`},
		{"token-bucket 1/1s burst=2 burst=3", "option burst= given twice"},
		{"token-bucket 1/1s capacity=2", "capacity= does not apply to token-bucket"},
		{"leaky-bucket 1/1s burst=2", "burst= does not apply to leaky-bucket"},
		{"sliding-log 1/1s burst=2", "burst= does not apply to sliding-log"},
		{"fixed-window 1/1s capacity=2", "capacity= does not apply to fixed-window"},
		{"token-bucket 1/1s rate=2", `unknown option "rate"`},
		{"token-bucket 1/1h burst=876601", "takes 100 years to drain; the most is 100"},
		{"token-bucket 1/8784h burst=1000000000", "years to drain; the most is 100"},
		{"token-bucket 1/" + strings.Repeat("x", 500), `period "` + strings.Repeat("x", 64) + `..." is not a Go duration`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := algo.ParsePolicy(tt.in)
			if err == nil {
				t.Fatalf("ParsePolicy(%q) = %v, want an error", tt.in, p)
			}
			if !errors.Is(err, algo.ErrInvalidPolicy) {
				t.Errorf("error %q does not wrap ErrInvalidPolicy", err)
			}
			if len(err.Error()) > 300 {
				t.Errorf("an error of %d bytes: bad input is quoted clipped", len(err.Error()))
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if !p.IsZero() {
				t.Errorf("got policy %v with the error, want the zero Policy", p)
			}
		})
	}
}

func TestNew(t *testing.T) {
	p, err := algo.New(algo.LeakyBucket, 1, time.Hour, 20)
	if err != nil || p.String() != "leaky-bucket 1/1h capacity=20" {
		t.Fatalf("New = %v, %v", p, err)
	}
	if p, err := algo.New(algo.SlidingLog, 5, time.Minute, 0); err != nil || p.Burst() != 5 {
		t.Errorf("New(sliding-log, burst 0) = %v, %v; want burst defaulting to the limit", p, err)
	}
	for _, bad := range []struct {
		alg    algo.Algorithm
		limit  int64
		period time.Duration
		burst  int64
	}{
		{0, 1, time.Second, 0},
		{99, 1, time.Second, 0},
		{algo.FixedWindow, 1, time.Second, 2},
		{algo.TokenBucket, 1, time.Second, -1},
		{algo.TokenBucket, 1, time.Second, algo.MaxLimit + 1},
		{algo.TokenBucket, 1, -time.Second, 0},
		{algo.TokenBucket, -1, time.Second, 0},
	} {
		if _, err := algo.New(bad.alg, bad.limit, bad.period, bad.burst); !errors.Is(err, algo.ErrInvalidPolicy) {
			t.Errorf("New(%v, %d, %v, %d) error = %v, want ErrInvalidPolicy", bad.alg, bad.limit, bad.period, bad.burst, err)
		}
	}
}

func TestPolicyText(t *testing.T) {
	var config struct {
		Policy algo.Policy `json:"policy"`
	}
	if err := json.Unmarshal([]byte(`{"policy":"token-bucket 3/1s burst=5"}`), &config); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(config)
	if err != nil || string(out) != `{"policy":"token-bucket 3/1s burst=5"}` {
		t.Errorf("round trip through JSON = %s, %v", out, err)
	}
	err = json.Unmarshal([]byte(`{"policy":"token-bucket 0/1s"}`), &config)
	if !errors.Is(err, algo.ErrInvalidPolicy) {
		t.Errorf("bad policy in JSON: error %v, want ErrInvalidPolicy", err)
	}
	if config.Policy.String() != "token-bucket 3/1s burst=5" {
		t.Errorf("a failed UnmarshalText changed the policy to %v", config.Policy)
	}
}

func TestAlgorithmString(t *testing.T) {
	if got := algo.Algorithm(0).String(); got != "Algorithm(0)" {
		t.Errorf("Algorithm(0).String() = %q", got)
	}
	if got := algo.SlidingWindow.String(); got != "sliding-window" {
		t.Errorf("SlidingWindow.String() = %q", got)
	}
}

// FuzzParsePolicy checks that the parser never panics, that every policy it
// accepts is within bounds, and that the canonical string parses back to the
// same policy.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{
		"token-bucket 3/1s burst=5", "leaky-bucket 1/1h capacity=20", "sliding-log 2/10",
		"sliding-window 3/500ms", "fixed-window 7/2", "fixed-window 1/0.000000001",
		"token-bucket 1/1h burst=876600", "token-bucket 1/1.5h", "x 1/1", "token-bucket 1/1s burst=",
		"token-bucket 1250000000/1s burst=4294967296", "fixed-window 1000000000000000/1s",
		"fixed-window 1000000000000001/1s", "token-bucket 1/1s burst=1000000000000001",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := algo.ParsePolicy(s)
		if err != nil {
			if !errors.Is(err, algo.ErrInvalidPolicy) || !p.IsZero() {
				t.Fatalf("ParsePolicy(%q) = %v, %v", s, p, err)
			}
			return
		}
		if p.Limit() < 1 || p.Limit() > algo.MaxLimit || p.Period() <= 0 || p.Period() > algo.MaxPeriod ||
			p.Burst() < 1 || p.Burst() > algo.MaxLimit {
			t.Fatalf("ParsePolicy(%q) = %v: out of bounds", s, p)
		}
		q, err := algo.ParsePolicy(p.String())
		if err != nil || q != p {
			t.Fatalf("ParsePolicy(%q).String() = %q parses to %v, %v", s, p.String(), q, err)
		}
	})
}

func TestMustParsePolicy(t *testing.T) {
	if p := algo.MustParsePolicy("token-bucket 100/1m burst=20"); p.String() != "token-bucket 100/1m burst=20" {
		t.Fatalf("MustParsePolicy: %v", p)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "invalid policy") {
			t.Fatalf("MustParsePolicy of a bad policy: recovered %v, want a panic naming the problem", r)
		}
	}()
	algo.MustParsePolicy("token-bucket 10/0s")
}
