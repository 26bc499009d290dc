package server

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/floodgate/floodgate/clock"
)

// fingerprint summarises the files at paths (a directory: every file under
// it, through links) by their names and contents, so that a change to any
// of them, a new one or a removed one changes it. Not by size and
// modification time: a file replaced within one tick of the file system's
// clock by another of the same size would look unchanged for good.
// Configuration, token and certificate files are small.
func fingerprint(paths ...string) string {
	h := sha256.New()
	file := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(h, "%s unreadable\n", path)
			return
		}
		fmt.Fprintf(h, "%s %d\n", path, len(b))
		h.Write(b)
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(h, "%s missing\n", p)
			continue
		}
		if !fi.IsDir() {
			file(p)
			continue
		}
		filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
				return nil
			}
			file(path) // through links: a ConfigMap's swap changes the target
			return nil
		})
	}
	return string(h.Sum(nil))
}

// watch calls changed each time the fingerprint of files() differs from
// last, the previous one, looking every interval on clk, until ctx is
// done. files is called at each look, so that the set of files may change
// with a reload. last is the files' fingerprint when they were read, taken
// before the watch starts: a change made meanwhile is seen at the first
// look.
func watch(ctx context.Context, clk clock.Clock, interval time.Duration, last string, files func() []string, changed func()) {
	for {
		t := clk.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if fingerprint(files()...) != last {
			changed()
			last = fingerprint(files()...) // the set of files may have changed
		}
	}
}
