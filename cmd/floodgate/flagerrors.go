package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/floodgate/floodgate/internal/suggest"
	"github.com/floodgate/floodgate/internal/valuetext"
)

// parseFlags parses args with fs, as fs.Parse does, but with errors for
// people: a bad value names the flag as the help writes it (--cost), the
// value and what is expected; an unknown flag gets the closest known one.
// A whole number is decimal digits only (fs.Parse takes 0x5 too). Values
// set later with fs.Set, from the environment, are checked the same way.
func parseFlags(fs *flag.FlagSet, args []string) error {
	var bad badValue
	fs.VisitAll(func(f *flag.Flag) { f.Value = checkedValue(f.Name, f.Value, &bad) })
	err := fs.Parse(args)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return err
	case bad.err != nil:
		return fmt.Errorf("--%s: %w", bad.name, bad.err)
	}
	return flagSyntaxError(fs, err)
}

// badValue is the last value a flag refused during a parse.
type badValue struct {
	name string
	err  error
}

// The messages of Go's flag package that flagSyntaxError rewrites (the
// test TestGoFlagMessages pins them).
const (
	flagUndefined = "flag provided but not defined: -"
	flagNoValue   = "flag needs an argument: -"
	flagBadSyntax = "bad flag syntax: "
)

// flagSyntaxError rewrites an error of fs.Parse that no value caused: an
// unknown flag, a flag without its value, a malformed one.
func flagSyntaxError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, flagUndefined); ok {
		var known []string
		fs.VisitAll(func(f *flag.Flag) { known = append(known, f.Name) })
		if s := suggest.Closest(name, known); s != "" {
			return fmt.Errorf("unknown flag --%s; did you mean --%s?", name, s)
		}
		return fmt.Errorf("unknown flag --%s", name)
	}
	if name, ok := strings.CutPrefix(msg, flagNoValue); ok {
		return fmt.Errorf("--%s needs a value", name)
	}
	if arg, ok := strings.CutPrefix(msg, flagBadSyntax); ok {
		return fmt.Errorf("%q is not a flag: write --NAME or --NAME=VALUE", arg)
	}
	return err
}

// checkedValue returns v, the value of the flag name, checking what it is
// set to by its kind (a whole number, a duration, a boolean) before v
// parses it; a value refused is recorded in bad.
func checkedValue(name string, v flag.Value, bad *badValue) flag.Value {
	c := &checked{Value: v, name: name, bad: bad}
	if b, ok := v.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return &checkedBool{c}
	}
	return c
}

// checked is a flag's value whose Set gives errors for people.
type checked struct {
	flag.Value
	name string
	bad  *badValue
}

func (c *checked) Set(s string) error {
	err := checkKind(c.Value, s)
	if err == nil {
		err = c.Value.Set(s)
	}
	if err != nil {
		c.bad.name, c.bad.err = c.name, err
	}
	return err
}

// checkedBool is a checked boolean flag, which takes no value after it.
type checkedBool struct{ *checked }

func (checkedBool) IsBoolFlag() bool { return true }

// checkKind checks s as a value of v's kind: decimal digits for a whole
// number, a number with a unit for a duration, true or false for a
// boolean. Values of other kinds (a policy, a list) check themselves.
func checkKind(v flag.Value, s string) error {
	g, ok := v.(flag.Getter)
	if !ok {
		return nil
	}
	switch g.Get().(type) {
	case int, int64, uint, uint64:
		return valuetext.Whole(s)
	case time.Duration:
		return valuetext.Duration(s)
	case bool:
		return valuetext.Bool(s)
	}
	return nil
}
