package algo

import (
	"time"
	"unsafe"
)

// slidingLog keeps the admitted units of the last PERIOD: an entry counts
// while its time is after t-PERIOD. Units admitted at one instant share an
// entry, so the log never holds more than LIMIT entries.
func (p *Policy) slidingLog(s *State, now, n int64) Decision {
	r := s.log
	if r == nil {
		r = &emptyLog
	}
	at := now
	if r.len > 0 {
		at = max(at, r.at(r.len-1).t) // the clock stepped back: the last entry's time
	}
	// Entries [0, expired) are PERIOD old or older at "at".
	var expired int
	var gone int64
	for expired < r.len && r.at(expired).t <= at-p.period {
		gone += r.at(expired).n
		expired++
	}
	count := r.units - gone
	if n > 0 && count+n <= p.limit {
		if r == &emptyLog {
			r = &ring{}
		}
		r.drop(expired, gone)
		r.push(at, n)
		s.log = r
		return Decision{Allowed: true, Remaining: p.limit - count - n, ResetAfter: time.Duration(at + p.period - now)}
	}
	d := Decision{Allowed: n == 0, Remaining: max(p.limit-count, 0)}
	if count > 0 {
		d.ResetAfter = time.Duration(r.at(r.len-1).t + p.period - now)
	}
	if n > 0 {
		// Wait until the oldest entries holding count+n-LIMIT units expire.
		need := count + n - p.limit
		for i := expired; i < r.len; i++ {
			if need -= r.at(i).n; need <= 0 {
				d.RetryAfter = time.Duration(r.at(i).t + p.period - now)
				break
			}
		}
	}
	return d
}

// emptyLog stands for a State without a log; it is never written.
var emptyLog ring

// entry is n units admitted at time t.
type entry struct{ t, n int64 }

// ring is a log of entries in time order, oldest first, in a circular
// buffer whose size is a power of two.
type ring struct {
	buf   []entry
	head  int   // index in buf of the oldest entry
	len   int   // number of entries
	units int64 // sum of the entries' units
}

func (r *ring) at(i int) entry { return r.buf[(r.head+i)&(len(r.buf)-1)] }

// drop removes the k oldest entries, which hold units units, and halves the
// buffer when it is mostly empty.
func (r *ring) drop(k int, units int64) {
	r.head = (r.head + k) & (len(r.buf) - 1)
	r.len -= k
	r.units -= units
	if len(r.buf) > 8 && r.len <= len(r.buf)/4 {
		r.resize(len(r.buf) / 2)
	}
}

// push appends n units at time t, which is not before the newest entry.
func (r *ring) push(t, n int64) {
	r.units += n
	if r.len > 0 {
		last := (r.head + r.len - 1) & (len(r.buf) - 1)
		if r.buf[last].t == t {
			r.buf[last].n += n
			return
		}
	}
	if r.len == len(r.buf) {
		r.resize(max(2*len(r.buf), 2))
	}
	r.buf[(r.head+r.len)&(len(r.buf)-1)] = entry{t, n}
	r.len++
}

func (r *ring) resize(size int) {
	buf := make([]entry, size)
	for i := range r.len {
		buf[i] = r.at(i)
	}
	r.buf, r.head = buf, 0
}

// LogSize returns the bytes a sliding-log State holds outside the State
// itself, its log's ring and entries; 0 for the other algorithms. A log
// holds at most LIMIT entries of 16 bytes, in a ring of at most twice the
// entries it holds.
func (s *State) LogSize() int {
	if s.log == nil {
		return 0
	}
	return int(unsafe.Sizeof(ring{})) + len(s.log.buf)*int(unsafe.Sizeof(entry{}))
}
