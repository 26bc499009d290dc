//go:build !plot

package main

import (
	"io"

	"github.com/floodgate/floodgate/algo"
)

// plotBuilt says that this floodgate cannot draw --plot: it was built
// without the plot tag, so that it does not carry gonum.org/v1/plot.
const plotBuilt = false

// writePlot fails: see plotBuilt.
func writePlot(io.Writer, string, *runStats, int, algo.Policy, bool) error { return errNoPlot }
