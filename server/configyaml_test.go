package server

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestYAMLSyntaxMessage pins the form of the YAML decoder's syntax errors
// that yamlSyntaxError reads the line of.
func TestYAMLSyntaxMessage(t *testing.T) {
	err := yaml.Unmarshal([]byte("store:\n\ttimeout: 1s\n"), new(yaml.Node))
	if err == nil || !strings.HasPrefix(err.Error(), "yaml: line 2: ") {
		t.Fatalf("gopkg.in/yaml.v3: a tab's error is %v, want one starting \"yaml: line 2: \": update yamlSyntaxError", err)
	}
}

// Every value the decoder refuses is found by the walk, whatever its
// place: an error never falls back to the decoder's own, which names Go
// types.
func TestYAMLErrorsNameNoGoType(t *testing.T) {
	for _, doc := range []string{
		"limits: {max_wait: 5}", "limits: {max_checks: 1.5}", "limits: {inline_policies: 2}",
		"store: {fail_for: [1s]}", "snapshot: {interval: {a: 1}}", "auth: {token_file: [a, b]}",
		"ops: {auth: sometimes}", "policies: [a, b]", "policies: {a: [x]}", "x: &a 1\ny: *a",
		"store: {max_bytes: 99999999999999999999}",
	} {
		_, err := ParseConfig([]byte(doc), "")
		if err == nil {
			t.Errorf("%s: accepted", doc)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "cannot unmarshal") || strings.Contains(msg, "server.") || strings.Contains(msg, "time.Duration") {
			t.Errorf("%s: %v: names Go's types", doc, err)
		}
	}
}
