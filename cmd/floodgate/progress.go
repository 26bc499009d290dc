package main

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progressConfig says when simulate shows a progress bar. Tests replace
// simulateProgress to see the bar in a buffer.
type progressConfig struct {
	// minSize is the smallest input, in bytes, that gets a bar.
	minSize int64
	// isTerminal reports whether w is a terminal.
	isTerminal func(w io.Writer) bool
}

var simulateProgress = progressConfig{minSize: 16 << 20, isTerminal: isTerminal}

// isTerminal reports whether w is an *os.File open on a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// withProgress returns in, counting what is read from it on a progress bar
// drawn on stderr, and a function that erases the bar for good. It returns
// in as it is, and a function that does nothing, unless stderr is a
// terminal, in is a regular file of at least pc.minSize bytes, and the
// event lines are not being written to a terminal too (eventsTo, nil for
// none), where they would tear the bar apart.
func (pc progressConfig) withProgress(in io.Reader, name string, stderr, eventsTo io.Writer) (io.Reader, func()) {
	f, ok := in.(*os.File)
	if !ok || !pc.isTerminal(stderr) || eventsTo != nil && pc.isTerminal(eventsTo) {
		return in, func() {}
	}
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() < pc.minSize || info.Size() == 0 {
		return in, func() {}
	}
	bar := progressbar.NewOptions64(info.Size(),
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetDescription("reading "+name),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionClearOnFinish(),
	)
	r := progressbar.NewReader(in, bar) // unlike a TeeReader, it ignores a file that grows past the bar's end
	return &r, func() {
		if !bar.IsFinished() { // it erases itself when it reaches the end
			bar.Clear()
		}
		bar.Exit()
	}
}
