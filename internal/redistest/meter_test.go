package redistest

import (
	"maps"
	"strings"
	"testing"
	"time"
)

// TestMeterCounts checks the Meter's counts against commands whose bytes
// are known, on two servers at once, and that its own INFOs are left out:
// Redis's accounting of commandstats and of total_net_input_bytes and
// total_net_output_bytes is what it relies on.
func TestMeterCounts(t *testing.T) {
	t.Parallel()
	a, b := NewServer(t), NewServer(t)
	m := NewMeter(a, b)
	m.Start(t)
	if u := m.Stop(t); u.Commands != 0 || u.BytesIn != 0 || u.BytesOut != 0 {
		t.Fatalf("nothing between Start and Stop: %+v, want 0 commands and bytes "+
			"(has Redis changed when it counts a command's bytes?)", u)
	}
	set := []string{"SET", "key", "value"}
	m.Start(t)
	for i := range 5 {
		for _, s := range []*Server{a, b} {
			if _, err := do(s.network, s.addr, set...); err != nil {
				t.Fatalf("SET %d on %s: %v", i, s.addr, err)
			}
		}
	}
	u := m.Stop(t)
	wantIn, wantOut := int64(10*len(encode(set))), int64(10*len("+OK\r\n"))
	if u.Commands != 10 || u.BytesIn != wantIn || u.BytesOut != wantOut {
		t.Fatalf("10 SETs: %d commands, %d bytes in, %d out; want 10, %d, %d "+
			"(has Redis changed its INFO commandstats or total_net_*_bytes?)",
			u.Commands, u.BytesIn, u.BytesOut, wantIn, wantOut)
	}
}

// TestMeterCPU checks that the Meter sees the CPU time Redis and this
// process spend.
func TestMeterCPU(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	m := NewMeter(s)
	m.Start(t)
	spin := "local i = 0 while i < 5000000 do i = i + 1 end return i"
	if _, err := do(s.network, s.addr, "EVAL", spin, "0"); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
	}
	u := m.Stop(t)
	if u.RedisCPU < 5*time.Millisecond {
		t.Errorf("Redis CPU of a Lua loop of 5,000,000 steps: %v, want some milliseconds", u.RedisCPU)
	}
	if u.ProcessCPU < 5*time.Millisecond {
		t.Errorf("process CPU of 20 ms of spinning: %v, want some milliseconds", u.ProcessCPU)
	}
	if u.Commands != 1 {
		t.Errorf("one EVAL: %d commands", u.Commands)
	}
}

// TestUsageReport checks the metrics Report gives a benchmark.
func TestUsageReport(t *testing.T) {
	u := Usage{RedisCPU: 3 * time.Millisecond, Commands: 4000, BytesIn: 10000, BytesOut: 6000,
		ProcessCPU: 5 * time.Millisecond, Servers: 2}
	r := testing.Benchmark(func(b *testing.B) { u.Report(b, 1000) })
	want := map[string]float64{"redis-µs/op": 3, "redis-cmds/op": 4, "redis-bytes/op": 16, "cpu-ns/op": 5000}
	if !maps.Equal(r.Extra, want) {
		t.Errorf("Report of %+v per 1000 ops: %v, want %v", u, r.Extra, want)
	}
	u.Servers = 0
	r = testing.Benchmark(func(b *testing.B) { u.Report(b, 1000) })
	if want := map[string]float64{"cpu-ns/op": 5000}; !maps.Equal(r.Extra, want) {
		t.Errorf("Report of a Meter of no server: %v, want %v", r.Extra, want)
	}
}

func TestParseInfo(t *testing.T) {
	good := strings.Join([]string{
		"# CPU", "used_cpu_sys:1.500000", "used_cpu_user:0.250001", "used_cpu_sys_children:9.000000",
		"# Commandstats", "cmdstat_set:calls=7,usec=10,usec_per_call=1.43,rejected_calls=0,failed_calls=0",
		"cmdstat_info:calls=100,usec=1000", "cmdstat_evalsha:calls=3,usec=5",
		"# Stats", "total_net_input_bytes:1234", "total_net_output_bytes:5678", "",
	}, "\r\n")
	u, err := parseInfo(good)
	if err != nil {
		t.Fatal(err)
	}
	want := Usage{RedisCPU: 1750001 * time.Microsecond, Commands: 10, BytesIn: 1234, BytesOut: 5678}
	if u != want {
		t.Fatalf("parseInfo = %+v, want %+v", u, want)
	}
	for _, bad := range []string{
		strings.Replace(good, "total_net_input_bytes:1234", "", 1),
		strings.Replace(good, "used_cpu_user:0.250001", "used_cpu_user:x", 1),
		strings.Replace(good, "calls=7,", "", 1),
	} {
		if u, err := parseInfo(bad); err == nil {
			t.Errorf("parseInfo of a bad INFO = %+v, want an error", u)
		}
	}
}

// TestMeterCluster checks that a Meter of Cluster.Servers reads every
// master.
func TestMeterCluster(t *testing.T) {
	t.Parallel()
	cl := SharedCluster(t)
	servers := cl.Servers()
	if len(servers) != len(cl.Addrs()) {
		t.Fatalf("%d servers for %d addresses", len(servers), len(cl.Addrs()))
	}
	m := NewMeter(servers...)
	m.Start(t)
	for i, s := range servers {
		if s.Addr() != cl.Addrs()[i] {
			t.Fatalf("server %d is %s, address %d %s", i, s.Addr(), i, cl.Addrs()[i])
		}
		if _, err := do(s.network, s.addr, "PING"); err != nil {
			t.Fatal(err)
		}
	}
	// Other tests share the cluster: at least one PING on each master.
	if u := m.Stop(t); u.Commands < int64(len(servers)) {
		t.Fatalf("a PING on each of %d masters: %d commands", len(servers), u.Commands)
	}
}
