package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestGoFlagMessages pins the messages of Go's flag package that
// flagSyntaxError rewrites: when Go changes them, the rewrite must follow.
func TestGoFlagMessages(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		prefix string
	}{
		{[]string{"--nope"}, flagUndefined},
		{[]string{"--n"}, flagNoValue},
		{[]string{"---n"}, flagBadSyntax},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("n", 0, "")
		err := fs.Parse(tc.args)
		if err == nil || !strings.HasPrefix(err.Error(), tc.prefix) {
			t.Errorf("Go's flag package: Parse(%q) = %v, want a message starting %q: update flagerrors.go", tc.args, err, tc.prefix)
		}
	}
}

func TestParseFlagsKeepsBoolFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	b := fs.Bool("json", false, "")
	n := fs.Int64("cost", 1, "")
	if err := parseFlags(fs, []string{"--json", "--cost", "-3", "key"}); err != nil {
		t.Fatal(err)
	}
	if !*b || *n != -3 || fs.Arg(0) != "key" {
		t.Errorf("--json --cost -3 key: json %v, cost %d, args %q", *b, *n, fs.Args())
	}
	if err := fs.Set("cost", "1e3"); err == nil || err.Error() != `"1e3" is not a whole number` {
		t.Errorf(`Set("cost", "1e3") = %v, want "1e3" is not a whole number`, err)
	}
}
