package algo_test

// The examples of the documents floodgate grew from (../shared/seeds), with
// their numbers, as tests.

import (
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
)

func mustParse(t testing.TB, s string) algo.Policy {
	t.Helper()
	p, err := algo.ParsePolicy(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func decide(t testing.TB, p algo.Policy, s *algo.State, now time.Duration, n int64) algo.Decision {
	t.Helper()
	d, err := p.Decide(s, int64(now), n)
	if err != nil {
		t.Fatalf("%v at %v: %v", p, now, err)
	}
	return d
}

// Seed 000: an embedded device may send at most 20 text messages in a
// burst, then one per hour ("20 drops, one leaks per hour"). The seed's Java
// never sets its leak time (it starts null and is only assigned when not
// null), so once 20 drops are in, its bucket never leaks again; here one
// drop leaks per hour, exactly.
func TestSeedSMSGuard(t *testing.T) {
	p := mustParse(t, "leaky-bucket 1/1h capacity=20")
	var s algo.State
	var sent []time.Duration
	// A bug fires a message every minute for ten hours.
	for now := time.Duration(0); now < 10*time.Hour; now += time.Minute {
		d := decide(t, p, &s, now, 1)
		if d.Allowed {
			sent = append(sent, now)
			continue
		}
		if d.RetryAfter <= 0 || d.RetryAfter > time.Hour {
			t.Fatalf("denied at %v with RetryAfter %v, want (0, 1h]", now, d.RetryAfter)
		}
	}
	// 20 at once (minutes 0-19), then one each hour as a drop leaks.
	want := []time.Duration{}
	for m := range 20 {
		want = append(want, time.Duration(m)*time.Minute)
	}
	for h := 1; h <= 9; h++ {
		want = append(want, time.Duration(h)*time.Hour)
	}
	if len(sent) != len(want) {
		t.Fatalf("sent %d messages at %v, want %d at %v", len(sent), sent, len(want), want)
	}
	for i := range want {
		if sent[i] != want[i] {
			t.Fatalf("message %d sent at %v, want %v", i, sent[i], want[i])
		}
	}
	// The message denied right after the burst is told to wait until the
	// first drop has leaked: at minute 20 the level is 20 - 20/60.
	var fresh algo.State
	for range 20 {
		decide(t, p, &fresh, 0, 1)
	}
	if d := decide(t, p, &fresh, 0, 1); d.Allowed || d.RetryAfter != time.Hour || d.Remaining != 0 || d.ResetAfter != 20*time.Hour {
		t.Errorf("21st message = %+v, want denied, retry after 1h, reset after 20h", d)
	}
}

// Seed 001: Algorithm::FloodControl's transcript. Each line may come at most
// twice in 10 seconds (local check, per line), and five lines of any kind
// in 60 seconds (global check); the local check runs first and counts even
// when the global one then refuses, as in floodtest.pl. The waits it printed
// were 5, 43, 26 and 4 seconds.
func TestSeedFloodControlTranscript(t *testing.T) {
	local := mustParse(t, "sliding-log 2/10")
	global := mustParse(t, "sliding-log 5/60")
	lines := map[string]*algo.State{}
	var all algo.State
	type step struct {
		at          time.Duration // seconds after 08:25:35
		line        string
		localWait   time.Duration // 0: local OK
		globalWait  time.Duration // 0: global OK (when the local check passed)
		globalCheck bool
	}
	s := time.Second
	transcript := []step{
		{0, "hello", 0, 0, true},
		{3 * s, "hello", 0, 0, true},
		{5 * s, "hello", 5 * s, 0, false}, // "next event allowed in 5 seconds (LOCAL CHECK for 'hello')"
		{8 * s, "bye", 0, 0, true},
		{10 * s, "hello", 0, 0, true}, // the first hello is exactly 10 s old: it no longer counts
		{13 * s, "see you", 0, 0, true},
		{17 * s, "next time", 0, 43 * s, true},     // "next event allowed in 43 seconds (GLOBAL CHECK)"
		{34 * s, "one more try?", 0, 26 * s, true}, // 26 seconds
		{56 * s, "free again", 0, 4 * s, true},     // 4 seconds
		{67 * s, "free again", 0, 0, true},         // accepted: the sixth line within the minute
	}
	for _, st := range transcript {
		if lines[st.line] == nil {
			lines[st.line] = &algo.State{}
		}
		d := decide(t, local, lines[st.line], st.at, 1)
		if d.Allowed != (st.localWait == 0) || d.RetryAfter != st.localWait {
			t.Fatalf("%v %q: local check %+v, want wait %v", st.at, st.line, d, st.localWait)
		}
		if !st.globalCheck {
			continue
		}
		d = decide(t, global, &all, st.at, 1)
		if d.Allowed != (st.globalWait == 0) || d.RetryAfter != st.globalWait {
			t.Fatalf("%v %q: global check %+v, want wait %v", st.at, st.line, d, st.globalWait)
		}
	}
}

// Seed 001 again: the CGI example keeps the flood data in a file between
// runs (5 per minute per remote address). Each run here restores the state
// from bytes, decides and saves it, like a short-lived process, and must
// decide exactly as one long-lived process would.
func TestSeedFloodControlCGIRuns(t *testing.T) {
	p := mustParse(t, "sliding-log 5/60")
	saved := map[string][]byte{}
	var inProcess = map[string]*algo.State{}
	ips := []string{"192.0.2.1", "192.0.2.1", "198.51.100.7"}
	for i := range 200 {
		ip := ips[i%len(ips)]
		now := time.Duration(i) * 3700 * time.Millisecond
		var s algo.State
		if err := s.UnmarshalBinary(saved[ip]); err != nil && saved[ip] != nil {
			t.Fatal(err)
		}
		got := decide(t, p, &s, now, 1)
		b, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		saved[ip] = b
		if inProcess[ip] == nil {
			inProcess[ip] = &algo.State{}
		}
		if want := decide(t, p, inProcess[ip], now, 1); got != want {
			t.Fatalf("run %d (%s at %v): %+v from saved state, %+v in process", i, ip, now, got, want)
		}
	}
}

// Seed 003: a servlet filter keeps, per user, the times of the calls of the
// last W milliseconds and answers "busy, try later" past N. A commenter
// noticed that two calls in the same millisecond share one entry of the
// Java TreeSet, so the second is admitted but never counted. Here units
// admitted at one instant add up in one entry.
func TestSeedServletFilterSameInstant(t *testing.T) {
	p := mustParse(t, "sliding-log 3/1s")
	var s algo.State
	var admitted int
	for range 5 {
		if decide(t, p, &s, 42*time.Millisecond, 1).Allowed {
			admitted++
		}
	}
	if admitted != 3 {
		t.Errorf("5 calls in one millisecond admitted %d, want 3", admitted)
	}
	// They expire together, exactly one window later.
	if d := decide(t, p, &s, 1042*time.Millisecond-1, 1); d.Allowed {
		t.Errorf("admitted 1ns before the calls expire: %+v", d)
	}
	if d := decide(t, p, &s, 1042*time.Millisecond, 3); !d.Allowed {
		t.Errorf("denied when the window has passed: %+v", d)
	}
}

// Seed 004: Bob and Alice each have a leaky bucket of capacity 1 that leaks
// one request every 2 seconds; the clock is injected (milliseconds).
func TestSeedBobAndAlice(t *testing.T) {
	p := mustParse(t, "leaky-bucket 1/2s capacity=1")
	states := map[string]*algo.State{"Bob": {}, "Alice": {}}
	ms := time.Millisecond
	for _, st := range []struct {
		at      time.Duration
		user    string
		allowed bool
	}{
		{0, "Bob", true},
		{999 * ms, "Bob", false},
		{1000 * ms, "Bob", false},
		{1000 * ms, "Alice", true},
		{1001 * ms, "Alice", false},
		{2001 * ms, "Alice", false},
		{2001 * ms, "Bob", true},
		{2001 * ms, "Bob", false},
		{3002 * ms, "Alice", true},
		{3003 * ms, "Alice", false},
	} {
		d := decide(t, p, states[st.user], st.at, 1)
		if d.Allowed != st.allowed {
			t.Fatalf("%s at %v: allowed=%v, want %v", st.user, st.at, d.Allowed, st.allowed)
		}
	}
	// And the limiter says how long each refused request should wait:
	// Bob's bucket, full at 2001ms, drains by 4001ms.
	if d := decide(t, p, states["Bob"], 3000*ms, 1); d.RetryAfter != 1001*ms {
		t.Errorf("Bob at 3000ms: RetryAfter %v, want 1.001s", d.RetryAfter)
	}
}
