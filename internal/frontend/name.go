package frontend

import (
	"strconv"

	"github.com/floodgate/floodgate"
)

// LimitName names a limit of l: name if not empty, else the limiter's
// name, or "default" for a limiter named by its policy. A name in taken
// gets "-2", "-3" and so on; LimitName marks the name it returns taken.
func LimitName(name string, l *floodgate.Limiter, taken map[string]bool) string {
	if name == "" {
		name = l.Name()
		if name == l.Policy().String() {
			name = "default"
		}
	}
	for k, base := 2, name; taken[name]; k++ {
		name = base + "-" + strconv.Itoa(k)
	}
	taken[name] = true
	return name
}
