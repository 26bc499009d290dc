package server

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/floodgate/floodgate/internal/suggest"
	"github.com/floodgate/floodgate/internal/valuetext"
	"go.yaml.in/yaml/v3"
)

// checkYAML checks data, a configuration, against Config's fields before
// the YAML decoder reads it, and returns the first setting at fault with
// its line, its value and what is expected, in the file's words rather
// than Go's types. It asks the decoder about each value alone, and
// refuses besides what the decoder would take wrongly: a fraction for a
// whole number (1.5 read as 1), a key given twice.
func checkYAML(data []byte) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return yamlSyntaxError(data, err)
	}
	return checkNode(&doc, reflect.TypeFor[Config](), "")
}

// yamlSyntaxError rewrites the decoder's error about data that is not
// YAML at all, and says so of the tabs YAML refuses for indenting. (The
// test TestYAMLSyntaxMessage pins the decoder's form, "yaml: line N: ...".)
func yamlSyntaxError(data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var line int
	if _, serr := fmt.Sscanf(msg, "line %d:", &line); serr == nil && line >= 1 {
		lines := strings.Split(string(data), "\n")
		if line <= len(lines) && strings.HasPrefix(strings.TrimLeft(lines[line-1], " "), "\t") {
			return fmt.Errorf("not YAML: %s (indent with spaces: YAML refuses tabs)", msg)
		}
	}
	return fmt.Errorf("not YAML: %s", msg)
}

var durationType = reflect.TypeFor[time.Duration]()

// checkNode checks the YAML node n as a value of type t, the setting
// path, and returns the first problem.
func checkNode(n *yaml.Node, t reflect.Type, path string) error {
	switch {
	case n.Kind == yaml.DocumentNode && len(n.Content) > 0:
		return checkNode(n.Content[0], t, path)
	case n.Kind == yaml.AliasNode && n.Alias != nil:
		return checkNode(n.Alias, t, path)
	case n.Kind == 0, n.Kind == yaml.DocumentNode, n.Tag == "!!null":
		return nil // left empty: the default
	case t.Kind() == reflect.Pointer:
		return checkNode(n, t.Elem(), path)
	case t != durationType && t.Kind() == reflect.Struct:
		return checkStruct(n, t, path)
	case t.Kind() == reflect.Map:
		return checkMap(n, t, path)
	}
	return checkLeaf(n, t, path)
}

// checkStruct checks the mapping n against the fields of the struct t.
func checkStruct(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: want settings under it, one NAME: VALUE a line, got %s", where(path, n), describeNode(n))
	}
	fields, names := yamlFields(t)
	return eachPair(n, path, func(k, v *yaml.Node) error {
		f, ok := fields[k.Value]
		if !ok {
			return unknownField(k, path, names)
		}
		return checkNode(v, f.Type, join(path, k.Value))
	})
}

// checkMap checks the mapping n as a map of type t (the policies).
func checkMap(n *yaml.Node, t reflect.Type, path string) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: want one NAME: VALUE a line under it, got %s", where(path, n), describeNode(n))
	}
	return eachPair(n, path, func(k, v *yaml.Node) error {
		return checkNode(v, t.Elem(), join(path, k.Value))
	})
}

// eachPair calls f on each key and value of the mapping n, and refuses
// a key given twice.
func eachPair(n *yaml.Node, path string, f func(k, v *yaml.Node) error) error {
	seen := make(map[string]int)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if line, dup := seen[k.Value]; dup {
			return fmt.Errorf("%s is given twice (lines %d and %d)", join(path, k.Value), line, k.Line)
		}
		seen[k.Value] = k.Line
		if err := f(k, v); err != nil {
			return err
		}
	}
	return nil
}

// unknownField is the error of the key k, not a field of path's.
func unknownField(k *yaml.Node, path string, names []string) error {
	in := ""
	if path != "" {
		in = " in " + path
	}
	if s := suggest.Closest(k.Value, names); s != "" {
		return fmt.Errorf("unknown field %q%s (line %d); did you mean %q?", k.Value, in, k.Line, s)
	}
	return fmt.Errorf("unknown field %q%s (line %d); want one of %s", k.Value, in, k.Line, strings.Join(names, ", "))
}

// checkLeaf checks the node n as a single value of type t, asking the
// YAML decoder, and says what is expected when it refuses.
func checkLeaf(n *yaml.Node, t reflect.Type, path string) error {
	isInt := t != durationType && reflect.Int <= t.Kind() && t.Kind() <= reflect.Int64
	if n.Decode(reflect.New(t).Interface()) == nil && (!isInt || n.Tag == "!!int") {
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%s: want one value, got %s", where(path, n), describeNode(n))
	}
	var err error
	switch {
	case t == durationType:
		err = valuetext.Duration(n.Value)
	case t.Kind() == reflect.Bool:
		err = valuetext.Bool(n.Value)
	case isInt:
		err = valuetext.Whole(n.Value)
	}
	if err == nil {
		err = fmt.Errorf("%q is not a valid value", n.Value)
	}
	return fmt.Errorf("%s: %w", where(path, n), err)
}

// yamlFields returns the fields of the struct t by their YAML names, and
// the names in the order of the fields.
func yamlFields(t reflect.Type) (map[string]reflect.StructField, []string) {
	byName := make(map[string]reflect.StructField)
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" {
			byName[name] = f
			names = append(names, name)
		}
	}
	return byName, names
}

// where names the setting path at the node n: "store.timeout (line 3)".
func where(path string, n *yaml.Node) string {
	if path == "" {
		path = "the configuration"
	}
	return fmt.Sprintf("%s (line %d)", path, n.Line)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// describeNode says what n is, for an error: a list, settings, or its
// text.
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "settings (NAME: VALUE)"
	}
	return fmt.Sprintf("%.64q", n.Value)
}
