package redisstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/redis/go-redis/v9"
)

// The chaos tests break a real redis-server under a load of many
// goroutines, through a client with go-redis's default options (which
// heed no context: ReadTimeout 3 s), and check what a user relies on:
// every call returns within its bound, no more is admitted than the
// policy allows, the store answers again within a second of the fault's
// end, and no goroutine is left behind.

// budget is the deadline of the load's short calls, and chaosTimeout the
// store's timeout, which bounds the calls without a deadline.
const (
	budget       = 100 * time.Millisecond
	chaosTimeout = 300 * time.Millisecond
	chaosLimit   = 3000
)

// chaos is one chaos test's server, client and store, with a load on one
// key of a sliding log of chaosLimit an hour.
type chaos struct {
	t   *testing.T
	srv *redistest.Server
	c   *redis.Client
	s   *Store
	tb  store.Table

	goroutines int // before the load, once the store is warm
}

func newChaos(t *testing.T) *chaos {
	srv := redistest.NewServer(t)
	c := srv.Client(t) // go-redis's defaults
	s, err := New(c, WithTimeout(chaosTimeout))
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := s.Table("chaos", algo.MustParsePolicy(fmt.Sprintf("sliding-log %d/1h", chaosLimit)))
	if _, err := tb.Decide(context.Background(), "warm", 0, 1); err != nil {
		t.Fatal(err)
	}
	return &chaos{t: t, srv: srv, c: c, s: s, tb: tb, goroutines: runtime.NumGoroutine()}
}

// A load is 16 goroutines calling in a loop until stopped, in four kinds:
// a decision with a deadline of budget, one with none, an ApplyEach of
// two decisions with budget, an Apply of one with none. It records the
// admitted units, the errors, and the slowest call of each kind.
type load struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	stall atomic.Int64 // the worst the probe saw, in ns (probe)

	mu       sync.Mutex
	admitted int64
	lost     int64 // units of the calls that failed, which may have taken effect
	calls    int
	errs     int
	worst    [2]time.Duration // with budget, without
	slow     int              // calls with budget over 150 ms
	latency  []time.Duration  // of the calls with budget
	unwanted []error          // errors a fault should not cause
}

func (ch *chaos) start(wantErr func(error) bool) *load {
	l := &load{stop: make(chan struct{})}
	for range probes {
		l.wg.Go(l.probe)
	}
	for i := range 16 {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ch.one(l, i%4, wantErr)
			}
		})
	}
	return l
}

func (ch *chaos) one(l *load, kind int, wantErr func(error) bool) {
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if kind%2 == 0 {
		ctx, cancel = context.WithTimeout(ctx, budget)
	}
	defer cancel()
	start := time.Now()
	admitted, units := int64(0), int64(1)
	var err error
	switch kind {
	case 0, 1:
		var d algo.Decision
		if d, err = ch.tb.Decide(ctx, "hot", 0, 1); err == nil && d.Allowed {
			admitted = 1
		}
	case 2, 3:
		ops := []store.Op{{Kind: store.OpDecide, Table: ch.tb, Key: "hot", N: 1}, {Kind: store.OpDecide, Table: ch.tb, Key: "hot", N: 1}}
		if kind == 2 {
			units = 2
			err = ch.s.ApplyEach(ctx, ops)
		} else {
			err = ch.s.Apply(ctx, ops[:1])
		}
		for _, op := range ops {
			if err == nil && op.Result.Decision.Allowed {
				admitted++
			}
		}
	}
	took := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	l.admitted += admitted
	l.worst[kind%2] = max(l.worst[kind%2], took)
	if kind%2 == 0 {
		l.latency = append(l.latency, took)
		if took > 150*time.Millisecond {
			l.slow++
		}
	}
	if err != nil {
		l.errs++
		l.lost += units
		if !wantErr(err) && len(l.unwanted) < 5 {
			l.unwanted = append(l.unwanted, err)
		}
	}
}

// probe measures, until the load stops, how late this process wakes a
// goroutine whose timer fired. On a loaded machine the OS may leave the
// process, or one of its threads, without a CPU for a while, and the
// timers of the Go scheduler's P that the thread holds wait meanwhile:
// a call that gives up at its deadline then returns late by as much.
// That delay is the machine's, not the store's, and check allows for it,
// up to maxStall. Several (probes) run at once, so that some probe's
// timer is likely on each P.
func (l *load) probe() {
	const tick = 2 * time.Millisecond
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		start := time.Now()
		time.Sleep(tick)
		late := int64(time.Since(start) - tick)
		for {
			old := l.stall.Load()
			if late <= old || l.stall.CompareAndSwap(old, late) {
				break
			}
		}
	}
}

const (
	probes   = 4
	maxStall = time.Second
)

// end stops the load and returns it, done.
func (l *load) end() *load {
	close(l.stop)
	l.wg.Wait()
	return l
}

// check fails t when a call took longer than its bound, with a margin for
// a busy machine, and as much again as the process woke up late (probe):
// go-redis's defaults held such calls for 5 s before.
func (l *load) check(t *testing.T, phase string) {
	t.Helper()
	slices.Sort(l.latency)
	p99 := time.Duration(0)
	if n := len(l.latency); n > 0 {
		p99 = l.latency[n*99/100]
	}
	stall := min(time.Duration(l.stall.Load()), maxStall)
	t.Logf("%s: %d calls, %d errors, %d admitted; with a %v budget: p99 %v, worst %v, %d over 150ms; without: worst %v (store timeout %v); the process woke up to %v late",
		phase, l.calls, l.errs, l.admitted, budget, p99, l.worst[0], l.slow, l.worst[1], chaosTimeout, stall)
	if l.worst[0] > budget+250*time.Millisecond+stall {
		t.Errorf("%s: a call with a %v budget took %v (the process woke up to %v late)", phase, budget, l.worst[0], stall)
	}
	if l.worst[1] > chaosTimeout+250*time.Millisecond+stall {
		t.Errorf("%s: a call bounded by the store's timeout of %v took %v (the process woke up to %v late)", phase, chaosTimeout, l.worst[1], stall)
	}
	for _, err := range l.unwanted {
		t.Errorf("%s: unexpected error: %v", phase, err)
	}
}

// recover returns how long after the fault's end a call is answered,
// trying for up to 5 s.
func (ch *chaos) recover(from time.Time) time.Duration {
	for time.Since(from) < 5*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		_, err := ch.tb.Decide(ctx, "probe", 0, 1)
		cancel()
		if err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(from)
	ch.t.Logf("answered again %v after the fault's end", took)
	if took > time.Second {
		ch.t.Errorf("the store answered %v after the fault's end, want within 1s", took)
	}
	return took
}

// noGrowth fails t when goroutines outlive the load: those of sends that
// Redis held end when it answers.
func (ch *chaos) noGrowth() {
	var n int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n = runtime.NumGoroutine(); n <= ch.goroutines+2 {
			return
		}
	}
	ch.t.Errorf("%d goroutines after the fault, %d before", n, ch.goroutines)
}

// unavailable says whether err is what a call that Redis does not answer
// in time returns.
func unavailable(err error) bool {
	return errors.Is(err, ErrUnavailable) && errors.Is(err, context.DeadlineExceeded)
}

// unreachable says whether err is what a call that the client cannot
// send or read returns, or one that Redis does not answer in time.
func unreachable(err error) bool { return errors.Is(err, ErrUnavailable) }

// Redis stopped (SIGSTOP) under load: every call returns ErrUnavailable
// within its deadline or the store's timeout, though the client's own
// timeouts are go-redis's defaults; once Redis goes on (SIGCONT) the
// store answers within a second; nothing is admitted beyond the policy.
func TestChaosStalledRedis(t *testing.T) {
	ch := newChaos(t)
	before := ch.start(unavailable)
	time.Sleep(200 * time.Millisecond)
	before.end().check(t, "before the stall")

	stalled := ch.start(unavailable)
	ch.srv.Pause()
	time.Sleep(1500 * time.Millisecond)
	l := stalled.end()
	ch.srv.Resume()
	resumed := time.Now()
	l.check(t, "stalled")
	if l.errs == 0 {
		t.Error("no call failed while Redis was stopped")
	}
	ch.recover(resumed)

	after := ch.start(unavailable)
	time.Sleep(200 * time.Millisecond)
	after.end().check(t, "after the stall")
	if n := before.admitted + l.admitted + after.admitted; n > chaosLimit {
		t.Errorf("%d admitted in all, limit %d", n, chaosLimit)
	}
	ch.noGrowth()
}

// Redis killed under load and started again, empty: calls fail within
// their bounds meanwhile, and the store answers within a second of the
// restart, loading its code again; each of Redis's two lives admits no
// more than the policy.
func TestChaosKilledRedis(t *testing.T) {
	ch := newChaos(t)
	up := ch.start(unavailable)
	time.Sleep(200 * time.Millisecond)
	up.end().check(t, "before the kill")
	down := ch.start(unreachable)
	ch.srv.Kill()
	time.Sleep(300 * time.Millisecond)
	down.end().check(t, "killed")
	ch.srv.Restart(t)
	ch.recover(time.Now())
	after := ch.start(unavailable)
	time.Sleep(300 * time.Millisecond)
	after.end().check(t, "after the restart")
	if first := up.admitted + down.admitted; first > chaosLimit || after.admitted > chaosLimit {
		t.Errorf("%d admitted before the restart, %d after; limit %d each", first, after.admitted, chaosLimit)
	}
	ch.noGrowth()
}

// FUNCTION FLUSH and SCRIPT FLUSH, over and over under load: the store
// loads its code again each time, and its answers stay exact: exactly
// the policy's limit is admitted, in the function form and in the EVAL
// form alike, less what calls that failed may have spent: a busy machine
// may hold one past its deadline, and a call fails only so, never for
// want of the code.
func TestChaosFlushedCode(t *testing.T) {
	for _, eval := range []bool{false, true} {
		t.Run(map[bool]string{false: "functions", true: "eval"}[eval], func(t *testing.T) {
			ch := newChaos(t)
			ch.s.run.noFunc.Store(eval)
			loads := ch.s.run.loads.Load()
			l := ch.start(unavailable)
			flushes := ch.repeat(t, func(ctx context.Context) error {
				if err := ch.c.FunctionFlush(ctx).Err(); err != nil {
					return err
				}
				return ch.c.ScriptFlush(ctx).Err()
			}, l.reached)
			l.end().check(t, "flushed")
			t.Logf("%d flushes, %d library loads", flushes, ch.s.run.loads.Load()-loads)
			if l.admitted > chaosLimit || l.admitted+l.lost < chaosLimit {
				t.Errorf("%d admitted and %d units failed, want exactly %d admitted less at most those", l.admitted, l.lost, chaosLimit)
			}
			ch.noGrowth()
		})
	}
}

// CLIENT KILL of the store's connections, over and over under load:
// calls on a killed connection fail, or go-redis sends them again, within
// their bounds; the store answers within a second of the last kill; and
// nothing is admitted beyond the policy.
func TestChaosKilledClients(t *testing.T) {
	ch := newChaos(t)
	l := ch.start(unreachable)
	kills := ch.repeat(t, func(ctx context.Context) error {
		return ch.c.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "no").Err()
	}, nil)
	last := time.Now()
	l.end().check(t, "clients killed")
	t.Logf("%d kills", kills)
	ch.recover(last)
	if l.admitted > chaosLimit {
		t.Errorf("%d admitted, limit %d", l.admitted, chaosLimit)
	}
	ch.noGrowth()
}

// repeat does fault every 50 ms for 1.5 s, and after that until done
// says the load has done enough (done nil: at once), or for 10 s at most;
// it returns how many times it did.
func (ch *chaos) repeat(t *testing.T, fault func(ctx context.Context) error, done func() bool) int {
	n := 0
	start := time.Now()
	for ; time.Since(start) < 1500*time.Millisecond || done != nil && !done() && time.Since(start) < 10*time.Second; n++ {
		time.Sleep(50 * time.Millisecond)
		if err := fault(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// reached says whether the load's calls have admitted, or may have spent,
// the whole limit.
func (l *load) reached() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.admitted+l.lost >= chaosLimit
}
