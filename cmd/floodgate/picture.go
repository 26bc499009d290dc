package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxPlotKeys is the most keys --plot draws.
const maxPlotKeys = 50

// errNoPlot is --plot's error in a floodgate built without the plot tag:
// plotting (gonum.org/v1/plot) stays out of the command, the image and a
// first go run unless asked for.
var errNoPlot = errors.New("--plot: this floodgate was built without plotting; " +
	"build it with the plot tag: make build, or go install -tags plot github.com/floodgate/floodgate/cmd/floodgate@latest")

// plotFormat returns the format of the picture file name by its
// extension: "svg" or "png", in any case.
func plotFormat(name string) (string, error) {
	switch ext := strings.ToLower(filepath.Ext(name)); ext {
	case ".svg", ".png":
		return ext[1:], nil
	case "":
		return "", fmt.Errorf("--plot %q: no extension (want a .svg or .png file)", name)
	default:
		return "", fmt.Errorf("--plot %q: unknown picture format %q (want a .svg or .png file)", name, filepath.Ext(name))
	}
}

// pendingFile is a file written in full or not at all: its contents go to
// a temporary file in the same directory, renamed to the file's name once
// complete.
type pendingFile struct {
	name string
	tmp  *os.File
}

// createPending starts the file name, so that a name that cannot be
// written fails early.
func createPending(name string) (*pendingFile, error) {
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".*")
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return nil, fmt.Errorf("%s: %w", name, pe.Err) // the name given, not the temporary file's
	}
	if err != nil {
		return nil, err
	}
	return &pendingFile{name: name, tmp: tmp}, nil
}

// write writes the file's contents with fill and puts the file in place.
func (pf *pendingFile) write(fill func(io.Writer) error) error {
	w := bufio.NewWriter(pf.tmp)
	err := fill(w)
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = pf.tmp.Chmod(0o644)
	}
	if cerr := pf.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(pf.tmp.Name(), pf.name)
	}
	if err != nil {
		return err
	}
	pf.tmp = nil
	return nil
}

// discard removes the temporary file, unless write put it in place.
func (pf *pendingFile) discard() {
	if pf.tmp != nil {
		pf.tmp.Close()
		os.Remove(pf.tmp.Name())
	}
}
