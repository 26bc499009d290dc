package floodgate

// Waiting returns the number of callers waiting on key in this Limiter,
// for tests that wait for a WaitN to take its place in line.
func (l *Limiter) Waiting(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.queues[key]; q != nil {
		return len(q.line)
	}
	return 0
}
