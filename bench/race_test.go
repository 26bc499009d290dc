//go:build race

package bench

// raceEnabled reports whether the race detector is on: it makes a real
// HTTP/2 stream about eight times slower, and the tests that send
// thousands of them send fewer.
const raceEnabled = true
