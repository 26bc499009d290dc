package seconds

import "time"

// Ceil returns d in whole seconds, rounded up, so that waiting Ceil(d)
// seconds always suffices: 1 for 1ns to 1s, 2 for 1s plus 1ns. It returns
// 0 for d <= 0, and 9223372037 for the longest time.Duration, without
// overflow. A caller that must never say 0, such as a Retry-After field,
// writes max(Ceil(d), 1).
func Ceil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
