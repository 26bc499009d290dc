package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/floodgate/floodgate/algo"
	"github.com/floodgate/floodgate/internal/seconds"
	"github.com/floodgate/floodgate/trace"
)

// keyStats is what a simulation did to one key.
type keyStats struct {
	key                         string
	events, admitted, refused   int64
	unitsAdmitted, unitsRefused int64
	// firstRefusal is the time of the first refused event, and
	// longestRetry the longest RetryAfter of a refused one (algo.Never for
	// a cost above the burst); both are meaningful when refused > 0.
	firstRefusal int64
	longestRetry time.Duration
	// points holds every decision, in time order, when the run keeps them
	// for --plot.
	points []plotPoint
}

// plotPoint is one decision as --plot draws it: the event's time, the
// units in use after it (burst - remaining) and the time after which the
// key is back to none in use if nothing else happens (its ResetAfter).
type plotPoint struct {
	t, used int64
	reset   time.Duration
	allowed bool
}

// runStats is what a simulation did to every key. The zero value counts
// without keeping the points; set keepPoints for --plot.
type runStats struct {
	keepPoints bool
	burst      int64 // the policy's burst, for the points' levels
	keys       map[string]*keyStats
	first      int64 // the first event's time
	last       int64 // the last event's time
}

// add counts the event ev decided as d.
func (rs *runStats) add(ev trace.Event, d algo.Decision) {
	ks := rs.keys[ev.Key]
	if ks == nil {
		if rs.keys == nil {
			rs.keys = make(map[string]*keyStats)
			rs.first = ev.T
		}
		ks = &keyStats{key: ev.Key}
		rs.keys[ev.Key] = ks
	}
	rs.last = ev.T
	ks.events++
	if d.Allowed {
		ks.admitted++
		ks.unitsAdmitted += ev.N
	} else {
		if ks.refused == 0 {
			ks.firstRefusal = ev.T
		}
		ks.refused++
		ks.unitsRefused += ev.N
		ks.longestRetry = max(ks.longestRetry, d.RetryAfter)
	}
	if rs.keepPoints {
		ks.points = append(ks.points, plotPoint{ev.T, rs.burst - d.Remaining, d.ResetAfter, d.Allowed})
	}
}

// total returns the totals over every key: the sums, the earliest first
// refusal and the longest retry.
func (rs *runStats) total() keyStats {
	var t keyStats
	for _, ks := range rs.keys {
		t.events += ks.events
		t.admitted += ks.admitted
		t.unitsAdmitted += ks.unitsAdmitted
		t.unitsRefused += ks.unitsRefused
		if ks.refused > 0 {
			if t.refused == 0 || ks.firstRefusal < t.firstRefusal {
				t.firstRefusal = ks.firstRefusal
			}
			t.longestRetry = max(t.longestRetry, ks.longestRetry)
		}
		t.refused += ks.refused
	}
	return t
}

// byRefusals returns the keys sorted by refused events, most first, then by
// events, most first, then by key.
func (rs *runStats) byRefusals() []*keyStats {
	return rs.sorted(func(a, b *keyStats) int {
		return cmp.Or(cmp.Compare(b.refused, a.refused), cmp.Compare(b.events, a.events), cmp.Compare(a.key, b.key))
	})
}

// busiest returns the n keys with the most events, most first, ties in
// key order.
func (rs *runStats) busiest(n int) []*keyStats {
	keys := rs.sorted(func(a, b *keyStats) int {
		return cmp.Or(cmp.Compare(b.events, a.events), cmp.Compare(a.key, b.key))
	})
	return keys[:min(n, len(keys))]
}

func (rs *runStats) sorted(order func(a, b *keyStats) int) []*keyStats {
	keys := make([]*keyStats, 0, len(rs.keys))
	for _, ks := range rs.keys {
		keys = append(keys, ks)
	}
	slices.SortFunc(keys, order)
	return keys
}

// writeSummary writes the --summary table: one line per key, sorted by
// byRefusals, and a TOTAL line, in columns aligned with spaces. Times are
// trace seconds, or dates in UTC when clock is set (for access logs, whose
// times are Unix times); "-" stands for no refusal, and "never" for the
// retry of a cost above the burst.
func writeSummary(w io.Writer, rs *runStats, clock bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tEVENTS\tADMITTED\tREFUSED\tUNITS_ADMITTED\tUNITS_REFUSED\tFIRST_REFUSAL\tLONGEST_RETRY")
	var line []byte
	row := func(name string, ks *keyStats) {
		line = append(line[:0], name...)
		for _, n := range [...]int64{ks.events, ks.admitted, ks.refused, ks.unitsAdmitted, ks.unitsRefused} {
			line = append(line, '\t')
			line = strconv.AppendInt(line, n, 10)
		}
		line = append(line, '\t')
		switch {
		case ks.refused == 0:
			line = append(line, "-\t-"...)
		default:
			line = appendInstant(line, ks.firstRefusal, clock)
			line = append(line, '\t')
			if ks.longestRetry == algo.Never {
				line = append(line, "never"...)
			} else {
				line = seconds.Append(line, int64(ks.longestRetry))
				line = append(line, 's')
			}
		}
		line = append(line, '\n')
		tw.Write(line)
	}
	for _, ks := range rs.byRefusals() {
		row(summaryKey(ks.key), ks)
	}
	total := rs.total()
	row("TOTAL", &total)
	return tw.Flush()
}

// appendInstant appends the time t: trace seconds, or with clock set the
// UTC date and time of t nanoseconds after the Unix epoch.
func appendInstant(b []byte, t int64, clock bool) []byte {
	if clock {
		return time.Unix(0, t).UTC().AppendFormat(b, "2006-01-02T15:04:05.999999999Z")
	}
	return seconds.Append(b, t)
}

// summaryKey returns key as the summary shows it: as it is when it is
// printable and holds no space, else quoted in Go syntax, so that every
// key takes one cell, and "", "TOTAL", "KEY" and a key that starts with a
// quote cannot be taken for something else.
func summaryKey(key string) string {
	if key == "" || key == "TOTAL" || key == "KEY" || key[0] == '"' || !utf8.ValidString(key) {
		return strconv.Quote(key)
	}
	for _, r := range key {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return strconv.Quote(key)
		}
	}
	return key
}
