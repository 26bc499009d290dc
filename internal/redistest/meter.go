package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A Meter measures what some redis-servers, and this process, spend
// between Start and Stop: the servers' CPU time, commands and network
// bytes, read from their INFO, and this process's CPU time. A benchmark
// starts it just before its timed part and stops it just after, then
// reports the Usage per operation. A Meter is for one goroutine at a time;
// it may be started again after Stop.
type Meter struct {
	servers []*Server
	before  Usage
	replies int64 // the bytes of the servers' replies to Start's INFO
}

// Usage is what a Meter measured between Start and Stop.
type Usage struct {
	// RedisCPU is the CPU time of the servers (INFO used_cpu_user +
	// used_cpu_sys, every thread of each), summed over the servers.
	RedisCPU time.Duration
	// Commands counts the commands the servers ran (the calls of INFO
	// commandstats), summed; INFO commands, the Meter's own, are left
	// out.
	Commands int64
	// BytesIn and BytesOut count the bytes the servers read from and wrote
	// to their clients (INFO total_net_input_bytes and
	// total_net_output_bytes), summed; the Meter's own are left out.
	BytesIn, BytesOut int64
	// ProcessCPU is this process's CPU time, user and system (getrusage).
	ProcessCPU time.Duration
	// Servers is how many servers the Meter read: 0 for a Meter of this
	// process alone.
	Servers int
}

// NewMeter returns a Meter of servers: one redis-server, every master of
// a Cluster (Cluster.Servers), or none, for this process's CPU time alone.
func NewMeter(servers ...*Server) *Meter { return &Meter{servers: servers} }

// Start reads the counters, failing tb when a server cannot tell them.
func (m *Meter) Start(tb testing.TB) {
	tb.Helper()
	m.before, m.replies = m.read(tb)
}

// Stop reads the counters again and returns what was spent since Start,
// failing tb when a server cannot tell.
func (m *Meter) Stop(tb testing.TB) Usage {
	tb.Helper()
	after, _ := m.read(tb)
	// Redis counts a command's request bytes when it reads them, before
	// it runs the command, and its reply's once written, after: Start's
	// reply and Stop's request fall between the two readings.
	return Usage{
		RedisCPU:   after.RedisCPU - m.before.RedisCPU,
		Commands:   after.Commands - m.before.Commands,
		BytesIn:    after.BytesIn - m.before.BytesIn - int64(len(m.servers)*len(encode(infoArgs))),
		BytesOut:   after.BytesOut - m.before.BytesOut - m.replies,
		ProcessCPU: after.ProcessCPU - m.before.ProcessCPU,
		Servers:    len(m.servers),
	}
}

// Report reports u per operation, ops being how many the benchmark did
// (b.N, or b.N times the decisions per call): redis-µs/op, redis-cmds/op,
// redis-bytes/op (in and out), unless u read no server, and cpu-ns/op
// (this process). It fails b when ops is not positive.
func (u Usage) Report(b *testing.B, ops int) {
	b.Helper()
	if ops <= 0 {
		b.Fatalf("redistest: Usage.Report of %d operations: want at least 1", ops)
	}
	n := float64(ops)
	b.ReportMetric(float64(u.ProcessCPU.Nanoseconds())/n, "cpu-ns/op")
	if u.Servers == 0 {
		return
	}
	b.ReportMetric(float64(u.RedisCPU.Nanoseconds())/1e3/n, "redis-µs/op")
	b.ReportMetric(float64(u.Commands)/n, "redis-cmds/op")
	b.ReportMetric(float64(u.BytesIn+u.BytesOut)/n, "redis-bytes/op")
}

// read returns the servers' counters, summed, and this process's CPU
// time, and the bytes of the servers' replies to the INFO that read them.
func (m *Meter) read(tb testing.TB) (sum Usage, replies int64) {
	tb.Helper()
	for _, s := range m.servers {
		u, n, err := info(s)
		if err != nil {
			tb.Fatal(err)
		}
		replies += n
		sum.RedisCPU += u.RedisCPU
		sum.Commands += u.Commands
		sum.BytesIn += u.BytesIn
		sum.BytesOut += u.BytesOut
	}
	cpu, err := processCPU()
	if err != nil {
		tb.Fatal(err)
	}
	sum.ProcessCPU = cpu
	return sum, replies
}

// infoArgs is the command a Meter sends.
var infoArgs = []string{"INFO", "cpu", "commandstats", "stats"}

// info returns the counters of s from its INFO (infoArgs), and the
// bytes of its reply as sent: a bulk string.
func info(s *Server) (Usage, int64, error) {
	reply, err := do(s.network, s.addr, infoArgs...)
	if err != nil {
		return Usage{}, 0, fmt.Errorf("redistest: INFO of %s: %w", s.addr, err)
	}
	u, err := parseInfo(reply)
	if err != nil {
		return Usage{}, 0, fmt.Errorf("redistest: INFO of %s: %w", s.addr, err)
	}
	return u, int64(len(fmt.Sprintf("$%d\r\n%s\r\n", len(reply), reply))), nil
}

// parseInfo reads the counters of a Usage from the text of INFO cpu
// commandstats stats (Redis 7). A field it needs that is missing is an
// error.
func parseInfo(text string) (Usage, error) {
	var u Usage
	seen := make(map[string]bool)
	for line := range strings.Lines(text) {
		name, value, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if !ok {
			continue
		}
		if err := u.parseField(name, value); err != nil {
			return Usage{}, fmt.Errorf("%s:%s: %w", name, value, err)
		}
		seen[name] = true
	}
	for _, f := range []string{"used_cpu_user", "used_cpu_sys", "total_net_input_bytes", "total_net_output_bytes"} {
		if !seen[f] {
			return Usage{}, fmt.Errorf("no %s in Redis's INFO", f)
		}
	}
	return u, nil
}

// parseField adds the INFO field name, of value value, to u, if u counts
// it.
func (u *Usage) parseField(name, value string) error {
	switch {
	case name == "used_cpu_user" || name == "used_cpu_sys":
		sec, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return err
		}
		u.RedisCPU += time.Duration(sec*1e6+0.5) * time.Microsecond
	case name == "total_net_input_bytes" || name == "total_net_output_bytes":
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return err
		}
		if name == "total_net_input_bytes" {
			u.BytesIn = n
		} else {
			u.BytesOut = n
		}
	case strings.HasPrefix(name, "cmdstat_") && name != "cmdstat_info":
		n, err := commandCalls(value)
		if err != nil {
			return err
		}
		u.Commands += n
	}
	return nil
}

// commandCalls returns the calls of a commandstats value:
// "calls=3,usec=5,...".
func commandCalls(value string) (int64, error) {
	for kv := range strings.SplitSeq(value, ",") {
		if v, ok := strings.CutPrefix(kv, "calls="); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no calls= in a commandstats value")
}

// processCPU returns this process's CPU time so far, user and system.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("redistest: getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
