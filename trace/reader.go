package trace

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/floodgate/floodgate/internal/seconds"
)

// MaxLineSize is the longest line a Reader accepts, in bytes, not
// counting the line ending: 1 MiB.
const MaxLineSize = 1 << 20

// Event is one event of a trace.
type Event struct {
	Line int    // the line it was read from, counting from 1
	T    int64  // its time in nanoseconds since the trace's origin, 0 to algo.MaxTime
	Key  string // what is limited; "" is a key like any other
	N    int64  // its cost, 0 or more
}

// Format turns one line of a trace, without its line ending, into an
// event. It returns ok false and no error for a line that holds no event,
// such as a blank line or a comment. A Format must return 0 <= T <=
// algo.MaxTime and N >= 0, and errors that wrap one of the package's
// sentinel errors and do not name the line; it need not set Line. ParseLine
// is floodgate's own format.
type Format func(line []byte) (ev Event, ok bool, err error)

// Reader reads the events of a trace, one line at a time. Lines may be up
// to MaxLineSize bytes long. A Reader is not safe for concurrent use.
type Reader struct {
	// Format turns each line into an event; nil means ParseLine. Set it
	// before the first call to Next.
	Format Format

	r    *bufio.Reader
	long []byte // a line longer than r's buffer
	line int    // the number of lines read
	last Event  // the previous event, 0 at first
	err  error  // the error Next returned, returned again
}

// NewReader returns a Reader of the trace in r, in floodgate's own format
// unless its Format is changed.
//
// The Reader buffers r in 64 KiB and reads from it only when the buffer
// holds no whole line, so a Read of r is the only moment Next can block
// waiting for input: a caller that buffers its own output can flush it
// there to stream results line by line (as floodgate simulate does).
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// Next returns the next event, skipping lines that hold none. It returns
// io.EOF at the end of the trace, and a *LineError for a line that is not
// an event in the Reader's Format, longer than MaxLineSize or earlier than
// the event before it (wrapping ErrOrder: a trace must be in time order;
// equal times are fine). An error from the underlying reader is returned
// as it is. After an error, Next returns the same error again.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	ev, err := r.next()
	if err != nil {
		r.err = err
		return Event{}, err
	}
	return ev, nil
}

func (r *Reader) next() (Event, error) {
	format := r.Format
	if format == nil {
		format = ParseLine
	}
	for {
		line, err := r.readLine()
		if err != nil {
			return Event{}, err
		}
		ev, ok, err := format(line)
		switch {
		case err != nil:
			return Event{}, &LineError{r.line, err}
		case !ok:
			continue
		case ev.T < r.last.T:
			return Event{}, &LineError{r.line, fmt.Errorf("%w: t %s is before t %s on line %d (traces must be in time order)",
				ErrOrder, seconds.Append(nil, ev.T), seconds.Append(nil, r.last.T), r.last.Line)}
		}
		ev.Line = r.line
		r.last = ev
		return ev, nil
	}
}

// readLine returns the next line without its ending, valid until the next
// call.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(r.long) <= MaxLineSize+len("\r\n") {
			line, err = r.r.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	switch {
	case err == io.EOF && len(line) > 0: // the last line has no ending
	case err != nil && !errors.Is(err, bufio.ErrBufferFull):
		return nil, err
	}
	r.line++
	if r.line == 1 {
		line = bytes.TrimPrefix(line, []byte("\uFEFF")) // a byte-order mark, as some editors write
	}
	line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
	if len(line) > MaxLineSize || err != nil && err != io.EOF {
		return nil, &LineError{r.line, fmt.Errorf("%w (more than %d bytes)", ErrLineTooLong, MaxLineSize)}
	}
	return line, nil
}
