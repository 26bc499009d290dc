package trace

import (
	"bytes"
	"fmt"
	"strconv"
	"time"

	"github.com/floodgate/floodgate/algo"
)

// LogKey names the field of an access log line that becomes an event's
// key.
type LogKey uint8

// The fields an AccessLog can take an event's key from.
const (
	// LogHost is the client's address, the line's first field, such as
	// 127.0.0.1 or 2001:db8::1.
	LogHost LogKey = iota
	// LogUser is the authenticated user, the third field: "-" for none.
	LogUser
	// LogRequest is the request line, unquoted, such as
	// "GET /a.gif?x=1 HTTP/1.0".
	LogRequest
	// LogPath is the request's target without its query, such as /a.gif:
	// the request line's second word up to any '?', or "" for a request
	// line of one word or none (such as "-").
	LogPath
)

var logKeyNames = [...]string{LogHost: "host", LogUser: "user", LogRequest: "request", LogPath: "path"}

// String returns the field's name: host, user, request or path.
func (k LogKey) String() string {
	if int(k) < len(logKeyNames) {
		return logKeyNames[k]
	}
	return "LogKey(" + strconv.Itoa(int(k)) + ")"
}

// AccessLog reads the access logs of web servers, in the Common Log Format
// or, when Combined is set, the Combined Log Format. Its Parse method is
// the Format. A line of the Common Log Format is
//
//	HOST IDENT USER [TIME] "REQUEST" STATUS SIZE
//
// as in
//
//	127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326
//
// and one of the Combined Log Format adds "REFERER" "USER-AGENT" after the
// size. Fields are separated by spaces; USER is everything between IDENT
// and " [", so it may hold spaces. TIME is DD/Mon/YYYY:HH:MM:SS with an
// optional fraction of one to nine digits, a space and the zone as +HHMM or
// -HHMM; month names are English, capitalized as written. The event's T is
// that instant as nanoseconds since the Unix epoch, which must be from
// 1970 to algo.MaxTime. A quoted field ends at the first '"' that no
// backslash escapes, and the escapes servers write (\" \\ \n \r \t \b \v
// and \xHH) are decoded where the field becomes a key. STATUS and SIZE are
// digits or "-". Whatever follows the last field, after a space, is
// ignored, so the Common Log Format reads Combined lines too, and both read
// the many formats that add fields at the end.
//
// Every line is a request of cost N 1, keyed by the field Key names. A
// blank line (only spaces and tabs) holds no event. Any other line that
// does not match is an error wrapping ErrSyntax, or ErrRange for a time
// out of range (day 31 of April, hour 24, a zone beyond ±23:59, a year
// before 1970).
//
// Servers stamp a request with the time it began but write its line when
// it ends, so a log's times may step back a little: wrap the Format in
// InOrder to read such a log with a Reader, which requires time order.
type AccessLog struct {
	Combined bool   // lines end with "REFERER" "USER-AGENT" after SIZE
	Key      LogKey // the field that becomes the key
}

// Parse is the Format of a's access logs, described at AccessLog.
func (a AccessLog) Parse(line []byte) (ev Event, ok bool, err error) {
	if len(bytes.Trim(line, " \t")) == 0 {
		return Event{}, false, nil
	}
	var f logFields
	if problem := f.split(line, a.Combined); problem != "" {
		return Event{}, false, fmt.Errorf("%w: %s (want %s)", ErrSyntax, problem, logShape(a.Combined))
	}
	if ev.T, err = parseLogTime(f.time); err != nil {
		return Event{}, false, err
	}
	ev.N = 1
	switch a.Key {
	case LogHost:
		ev.Key = string(f.host)
	case LogUser:
		ev.Key = string(f.user)
	case LogRequest:
		ev.Key = string(unescapeLog(f.request))
	case LogPath:
		ev.Key = string(requestPath(unescapeLog(f.request)))
	default:
		return Event{}, false, fmt.Errorf("%w: unknown access log key %v", ErrSyntax, a.Key)
	}
	return ev, true, nil
}

func logShape(combined bool) string {
	if combined {
		return `HOST IDENT USER [TIME] "REQUEST" STATUS SIZE "REFERER" "USER-AGENT"`
	}
	return `HOST IDENT USER [TIME] "REQUEST" STATUS SIZE`
}

// logFields are the fields of an access log line, quoted ones still
// escaped and without their quotes, the time without its brackets.
type logFields struct {
	host, user, time, request []byte
}

// split splits line into f's fields, and returns the problem with the
// line as a phrase, or "".
func (f *logFields) split(line []byte, combined bool) string {
	rest := line
	var ident []byte
	if f.host, rest = logWord(rest); len(f.host) == 0 {
		return "no host at the start of the line"
	}
	if ident, rest = logWord(rest); len(ident) == 0 {
		return "the line ends after the host"
	}
	open := bytes.Index(rest, []byte(" ["))
	if open < 0 {
		return "no [TIME] after the ident"
	}
	f.user = bytes.Trim(rest[:open], " ")
	if len(f.user) == 0 {
		return "no user between the ident and [TIME]"
	}
	rest = rest[open+2:]
	end := bytes.IndexByte(rest, ']')
	if end < 0 {
		return "no ] after [TIME"
	}
	f.time, rest = rest[:end], rest[end+1:]
	var problem string
	if f.request, rest, problem = logQuoted(rest, "request"); problem != "" {
		return problem
	}
	for _, field := range [...]struct{ name, after string }{{"status", "request"}, {"size", "status"}} {
		var w []byte
		if w, rest = logWord(rest); len(w) == 0 {
			return "no " + field.name + " after the " + field.after
		}
		if !isLogNumber(w) {
			return fmt.Sprintf("%s %q is not digits or -", field.name, clip(w))
		}
	}
	if combined {
		if _, rest, problem = logQuoted(rest, "referer"); problem != "" {
			return problem
		}
		if _, rest, problem = logQuoted(rest, "user-agent"); problem != "" {
			return problem
		}
	}
	if len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t' {
		return fmt.Sprintf("%q right after the last field", clip(rest))
	}
	return ""
}

// logWord skips leading spaces and returns the word that follows, up to a
// space, a tab or the end, and what comes after it.
func logWord(b []byte) (word, rest []byte) {
	b = bytes.TrimLeft(b, " ")
	i := bytes.IndexAny(b, " \t")
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i:]
}

// logQuoted skips leading spaces and returns the contents of the quoted
// field name that follows, still escaped, and what comes after its closing
// quote, which must be the end or a space.
func logQuoted(b []byte, name string) (inner, rest []byte, problem string) {
	b = bytes.TrimLeft(b, " ")
	if len(b) == 0 {
		return nil, nil, "no \"" + name + "\" at the end of the line"
	}
	if b[0] != '"' {
		return nil, nil, fmt.Sprintf("%q where the quoted %s should be", clip(b), name)
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			if i+1 < len(b) && b[i+1] != ' ' && b[i+1] != '\t' {
				return nil, nil, fmt.Sprintf("%q right after the quoted %s", clip(b[i+1:]), name)
			}
			return b[1:i], b[i+1:], ""
		}
	}
	return nil, nil, "the quoted " + name + " has no closing quote"
}

// clip shortens b to 20 bytes for an error message.
func clip(b []byte) []byte {
	if len(b) > 20 {
		return append(b[:20:20], "..."...)
	}
	return b
}

func isLogNumber(w []byte) bool {
	if string(w) == "-" {
		return true
	}
	for _, c := range w {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// unescapeLog decodes the escapes Apache httpd and nginx write in quoted
// fields: \" \\ \n \r \t \b \v and \xHH. Any other backslash is kept.
func unescapeLog(b []byte) []byte {
	i := bytes.IndexByte(b, '\\')
	if i < 0 {
		return b
	}
	out := append(make([]byte, 0, len(b)), b[:i]...)
	for ; i < len(b); i++ {
		c := b[i]
		if c != '\\' || i+1 == len(b) {
			out = append(out, c)
			continue
		}
		switch e := b[i+1]; e {
		case '"', '\\':
			out = append(out, e)
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'b':
			out = append(out, '\b')
		case 'v':
			out = append(out, '\v')
		case 'x':
			if i+3 < len(b) {
				if hi, lo := unhex(b[i+2]), unhex(b[i+3]); hi >= 0 && lo >= 0 {
					out = append(out, byte(hi<<4|lo))
					i += 3
					continue
				}
			}
			out = append(out, c)
			continue
		default:
			out = append(out, c)
			continue
		}
		i++
	}
	return out
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// requestPath returns the target of the request line req, its second
// word, up to any '?'; nil when req has no second word.
func requestPath(req []byte) []byte {
	_, rest, ok := bytes.Cut(req, []byte(" "))
	if !ok {
		return nil
	}
	target, _, _ := bytes.Cut(bytes.TrimLeft(rest, " "), []byte(" "))
	target, _, _ = bytes.Cut(target, []byte("?"))
	return target
}

var monthNames = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// parseLogTime parses DD/Mon/YYYY:HH:MM:SS[.F] ±HHMM into nanoseconds
// since the Unix epoch.
func parseLogTime(b []byte) (int64, error) {
	bad := func() (int64, error) {
		return 0, fmt.Errorf("%w: time %q is not DD/Mon/YYYY:HH:MM:SS ±HHMM, such as 10/Oct/2000:13:55:36 -0700", ErrSyntax, b)
	}
	// 10/Oct/2000:13:55:36 -0700 is 26 bytes; a fraction adds 2 to 10.
	if len(b) < 26 || b[2] != '/' || b[6] != '/' || b[11] != ':' || b[14] != ':' || b[17] != ':' {
		return bad()
	}
	day, ok1 := digits(b[0:2])
	year, ok2 := digits(b[7:11])
	hour, ok3 := digits(b[12:14])
	minute, ok4 := digits(b[15:17])
	sec, ok5 := digits(b[18:20])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return bad()
	}
	month := 0
	for i, name := range monthNames {
		if string(b[3:6]) == name {
			month = i + 1
		}
	}
	if month == 0 {
		return bad()
	}
	rest := b[20:]
	var frac int64
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && '0' <= rest[n] && rest[n] <= '9' {
			n++
		}
		if n == 1 || n > 10 {
			return bad()
		}
		f, _ := digits(rest[1:n])
		for range 10 - n {
			f *= 10
		}
		frac, rest = int64(f), rest[n:]
	}
	if len(rest) != 6 || rest[0] != ' ' || rest[1] != '+' && rest[1] != '-' {
		return bad()
	}
	zh, ok1 := digits(rest[2:4])
	zm, ok2 := digits(rest[4:6])
	if !ok1 || !ok2 {
		return bad()
	}
	outOfRange := func(what string) (int64, error) {
		return 0, fmt.Errorf("%w: time %q: %s", ErrRange, b, what)
	}
	switch {
	case day < 1 || day > daysIn(month, year):
		return outOfRange("no such day")
	case hour > 23 || minute > 59 || sec > 59:
		return outOfRange("no such time of day")
	case zh > 23 || zm > 59:
		return outOfRange("no such zone")
	}
	offset := int64(zh*3600 + zm*60)
	if rest[1] == '-' {
		offset = -offset
	}
	unix := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC).Unix() - offset
	if unix < 0 || unix > algo.MaxTime/1_000_000_000 || unix*1e9+frac > algo.MaxTime {
		return outOfRange("before 1970 or after " + maxTimeYear)
	}
	return unix*1e9 + frac, nil
}

var maxTimeYear = strconv.Itoa(time.Unix(0, algo.MaxTime).UTC().Year())

// digits returns the decimal value of b, which must be all digits.
func digits(b []byte) (int, bool) {
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// InOrder is a Format that keeps the times of another from stepping back,
// for logs whose lines are nearly but not quite in time order, such as
// access logs. An event earlier than the latest event before it is taken
// at that latest time, and counted in Moved. InOrder is for one trace
// read once: it remembers the latest time. Use its Parse method as the
// Format, through a pointer.
type InOrder struct {
	Format Format // the lines' format; nil means ParseLine

	// Moved is the number of events taken at a later time than their own,
	// and MaxMove the most any of them was moved, in nanoseconds.
	Moved, MaxMove int64

	latest int64
}

// Parse returns o.Format's event for line, at the latest time seen before
// it when it is earlier.
func (o *InOrder) Parse(line []byte) (Event, bool, error) {
	format := o.Format
	if format == nil {
		format = ParseLine
	}
	ev, ok, err := format(line)
	if err != nil || !ok {
		return ev, ok, err
	}
	if ev.T < o.latest {
		o.Moved++
		o.MaxMove = max(o.MaxMove, o.latest-ev.T)
		ev.T = o.latest
	}
	o.latest = ev.T
	return ev, true, nil
}
