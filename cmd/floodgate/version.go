package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/floodgate/floodgate"
)

const versionUsage = `Usage: floodgate version

Version prints floodgate's release (floodgate.Version: v1.2.3, or
v1.3.0-dev between releases), the module version when go install built it
from a module of another version, the commit and its time when the build recorded them, and
the Go version, on one line:

  floodgate v1.2.3 commit 0123456789ab 2026-11-25T10:00:00Z (modified) go1.26.8
`

// runVersion prints floodgate's version.
func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
			fmt.Fprint(stdout, versionUsage)
			return exitOK
		}
		fmt.Fprintf(stderr, "floodgate version: takes no arguments, got %q\n\n%s", args[0], versionUsage)
		return exitUsage
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(stdout, "floodgate", floodgate.Version, runtime.Version())
		return exitOK
	}
	fmt.Fprintln(stdout, versionLine(bi))
	return exitOK
}

// versionLine is version's line for the build bi.
func versionLine(bi *debug.BuildInfo) string {
	line := "floodgate " + floodgate.Version
	var rev, at, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = " (modified)"
			}
		}
	}
	// A build in a clone records its commit, and Go (1.24 on) a module
	// version made from it too, which says nothing more; go install of a
	// module records the module's version alone.
	if v := bi.Main.Version; rev == "" && v != "" && v != "(devel)" && v != floodgate.Version {
		line += " (module " + v + ")"
	}
	if rev != "" {
		line += " commit " + rev[:min(len(rev), 12)]
		if at != "" {
			line += " " + at
		}
		line += modified
	}
	return line + " " + bi.GoVersion
}
