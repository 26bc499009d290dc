package main

import (
	"bufio"
	"cmp"
	"io"
	"slices"
	"strconv"
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

// byRefusals returns the keys in the summary's order: by refused events,
// most first, then by events, most first, then by key.
func byRefusals(a, b *keyStats) int {
	return cmp.Or(cmp.Compare(b.refused, a.refused), cmp.Compare(b.events, a.events), cmp.Compare(a.key, b.key))
}

// leading returns the first n keys (all for n 0) in order, sorted. A few
// keys of many are picked keeping n at a time, without a sort of all.
func (rs *runStats) leading(n int, order func(a, b *keyStats) int) []*keyStats {
	if n <= 0 || n > len(rs.keys)/8 || n > 4096 {
		keys := make([]*keyStats, 0, len(rs.keys))
		for _, ks := range rs.keys {
			keys = append(keys, ks)
		}
		slices.SortFunc(keys, order)
		if n > 0 && n < len(keys) {
			keys = keys[:n]
		}
		return keys
	}
	keys := make([]*keyStats, 0, n+1)
	for _, ks := range rs.keys {
		if len(keys) == n && order(ks, keys[n-1]) >= 0 {
			continue
		}
		i, _ := slices.BinarySearchFunc(keys, ks, order)
		keys = slices.Insert(keys, i, ks)
		if len(keys) > n {
			keys = keys[:n]
		}
	}
	return keys
}

// summaryHeader is the summary's first line, as cells.
var summaryHeader = []string{"KEY", "EVENTS", "ADMITTED", "REFUSED", "UNITS_ADMITTED", "UNITS_REFUSED", "FIRST_REFUSAL", "LONGEST_RETRY"}

// writeSummary writes the --summary table: one line per key, sorted by
// byRefusals (the first top keys, all for top 0, and then an OTHERS line
// for the rest), and a TOTAL line, in columns aligned with spaces. Times
// are trace seconds, or dates in UTC when clock is set (for access logs,
// whose times are Unix times); "-" stands for no refusal, and "never" for
// the retry of a cost above the burst. The rows are written as they are
// made, once the columns' widths are known: only the keys' order is held.
func writeSummary(w io.Writer, rs *runStats, clock bool, top int) error {
	keys := rs.leading(top, byRefusals)
	total := rs.total()
	var rows []summaryRow
	for _, ks := range keys {
		rows = append(rows, summaryRow{summaryKey(ks.key), ks})
	}
	if len(keys) < len(rs.keys) {
		others := rs.others(total, keys)
		rows = append(rows, summaryRow{"OTHERS", &others})
	}
	rows = append(rows, summaryRow{"TOTAL", &total})
	widths := make([]int, len(summaryHeader))
	for i, h := range summaryHeader {
		widths[i] = len(h)
	}
	var cells [][]byte
	for _, r := range rows {
		cells = r.cells(cells[:0], clock)
		for i, c := range cells {
			widths[i] = max(widths[i], utf8.RuneCount(c))
		}
	}
	bw := bufio.NewWriter(w)
	var line []byte
	header := make([][]byte, len(summaryHeader))
	for i, h := range summaryHeader {
		header[i] = []byte(h)
	}
	bw.Write(alignRow(line[:0], header, widths))
	for _, r := range rows {
		cells = r.cells(cells[:0], clock)
		line = alignRow(line[:0], cells, widths)
		bw.Write(line)
	}
	return bw.Flush()
}

// summaryRow is a line of the summary: a name and its counts.
type summaryRow struct {
	name string
	ks   *keyStats
}

// cells appends the row's cells to cells.
func (r summaryRow) cells(cells [][]byte, clock bool) [][]byte {
	ks := r.ks
	cells = append(cells, []byte(r.name))
	for _, n := range [...]int64{ks.events, ks.admitted, ks.refused, ks.unitsAdmitted, ks.unitsRefused} {
		cells = append(cells, strconv.AppendInt(nil, n, 10))
	}
	if ks.refused == 0 {
		return append(cells, []byte("-"), []byte("-"))
	}
	cells = append(cells, appendInstant(nil, ks.firstRefusal, clock))
	if ks.longestRetry == algo.Never {
		return append(cells, []byte("never"))
	}
	return append(cells, append(seconds.Append(nil, int64(ks.longestRetry)), 's'))
}

// alignRow appends cells to line, each but the last padded with spaces to
// its column's width and two more, then a newline.
func alignRow(line []byte, cells [][]byte, widths []int) []byte {
	for i, c := range cells {
		line = append(line, c...)
		if i < len(cells)-1 {
			for range widths[i] - utf8.RuneCount(c) + 2 {
				line = append(line, ' ')
			}
		}
	}
	return append(line, '\n')
}

// others returns the counts of the keys not in shown: total minus theirs,
// with the first refusal and the longest retry of those others.
func (rs *runStats) others(total keyStats, shown []*keyStats) keyStats {
	in := make(map[*keyStats]bool, len(shown))
	o := total
	for _, ks := range shown {
		in[ks] = true
		o.events -= ks.events
		o.admitted -= ks.admitted
		o.refused -= ks.refused
		o.unitsAdmitted -= ks.unitsAdmitted
		o.unitsRefused -= ks.unitsRefused
	}
	o.firstRefusal, o.longestRetry = 0, 0
	first := true
	for _, ks := range rs.keys {
		if in[ks] || ks.refused == 0 {
			continue
		}
		if first || ks.firstRefusal < o.firstRefusal {
			o.firstRefusal, first = ks.firstRefusal, false
		}
		o.longestRetry = max(o.longestRetry, ks.longestRetry)
	}
	return o
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
// quote cannot be taken for something else (nor can OTHERS).
func summaryKey(key string) string {
	if key == "" || key == "TOTAL" || key == "OTHERS" || key == "KEY" || key[0] == '"' || !utf8.ValidString(key) {
		return strconv.Quote(key)
	}
	for _, r := range key {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) {
			return strconv.Quote(key)
		}
	}
	return key
}

// withCommas returns n in decimal with commas between groups of three
// digits, as in 12,345.
func withCommas(n int64) string {
	s := strconv.FormatInt(n, 10)
	start := 0
	if n < 0 {
		start = 1
	}
	for i := len(s) - 3; i > start; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
