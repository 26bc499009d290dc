package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/floodgate/floodgate/internal/suggest"
)

// knownEnv returns the FLOODGATE_* environment variables floodgate reads:
// serve's settings (serveEnv), the token, and client's server.
func knownEnv() []string {
	known := slices.Collect(maps.Values(serveEnv))
	known = append(known, "FLOODGATE_TOKEN", "FLOODGATE_SERVER")
	slices.Sort(known)
	return slices.Compact(known)
}

// warnUnknownEnv writes a line on w for each FLOODGATE_* variable of the
// environment that floodgate does not read, with the closest it reads: a
// mistyped name is otherwise ignored without a word.
func warnUnknownEnv(w io.Writer) {
	known := knownEnv()
	var unknown []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "FLOODGATE_") && !slices.Contains(known, name) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		if s := suggest.Closest(name, known); s != "" {
			fmt.Fprintf(w, "floodgate: warning: $%s is not a floodgate setting and is ignored; did you mean $%s?\n", name, s)
		} else {
			fmt.Fprintf(w, "floodgate: warning: $%s is not a floodgate setting and is ignored ('floodgate serve -h' lists them)\n", name)
		}
	}
}
