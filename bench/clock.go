package bench

// ClockReads names, for each peer whose clock read is known, the peer of
// BenchmarkClock that measures that read: "floodgate" for floodgate's
// default clock (clock.UnixNano, one monotonic read), which the floor
// reads too, "time.Now" for the
// peers that call time.Now on each decision. cmd/ratios subtracts it
// from the peer's serial one-key figures, so that what each limiter
// spends above its clock read is compared in one run.
var ClockReads = map[string]string{
	"floodgate":   "floodgate",
	"floor":       "floodgate",
	"xrate":       "time.Now",
	"xrate-nokey": "time.Now",
	"uber":        "time.Now",
}

// ClockScenario is the scenario of BenchmarkClock.
const ClockScenario = "Clock"
