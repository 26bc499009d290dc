package trace

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/floodgate/floodgate/internal/seconds"
)

// FuzzParseLineJSON checks ParseLine's own walk of JSON lines against
// encoding/json: whatever it accepts, encoding/json decodes to the same
// event, and it calls invalid exactly what json.Valid rejects.
func FuzzParseLineJSON(f *testing.F) {
	for _, s := range []string{
		`{"t": 12.345, "key": "alice", "n": 1}`,
		`{"x": {"y": ["}", "\""]}, "t": 0, "key": "\u00e9\ud800", "n": null}`,
		`{"\u0074": 1, "key": null}`,
		`{"t": 1,}`,
		"{\"t\": 1, \"key\": \"\xff\"}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if !strings.HasPrefix(strings.TrimLeft(line, " \t"), "{") {
			return
		}
		ev, ok, err := ParseLine([]byte(line))
		if invalid := err != nil && strings.Contains(err.Error(), "invalid JSON"); invalid == json.Valid([]byte(line)) {
			t.Fatalf("ParseLine(%q): %v, but json.Valid says %v", line, err, !invalid)
		}
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrNumber) && !errors.Is(err, ErrRange) {
				t.Fatalf("ParseLine(%q): %v wraps no sentinel", line, err)
			}
			return
		}
		if !ok {
			t.Fatalf("ParseLine(%q) skipped a JSON line", line)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("ParseLine accepted %q, which encoding/json rejects: %v", line, err)
		}
		want := Event{N: 1}
		for name, raw := range m { // names are distinct, since ParseLine accepted
			var err error
			switch {
			case name == "t":
				want.T, err = seconds.Parse(string(raw))
			case name == "n" && string(raw) != "null":
				want.N, err = seconds.ParseCount(string(raw))
			case name == "key":
				err = json.Unmarshal(raw, &want.Key)
			}
			if err != nil {
				t.Fatalf("ParseLine accepted %q, whose %q is %s: %v", line, name, raw, err)
			}
		}
		if ev != want {
			t.Fatalf("ParseLine(%q) = %+v, encoding/json gives %+v", line, ev, want)
		}
	})
}

func BenchmarkParseLine(b *testing.B) {
	for _, bb := range []struct{ name, line string }{
		{"text", "12.345678 user123 1"},
		{"JSON", `{"t": 12.345678, "key": "user123", "n": 1, "path": "/api/v1/items"}`},
	} {
		b.Run(bb.name, func(b *testing.B) {
			line := []byte(bb.line)
			b.ReportAllocs()
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				if _, _, err := ParseLine(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
