package trace_test

import (
	"fmt"
	"io"
	"strings"

	"github.com/floodgate/floodgate/trace"
)

func ExampleReader() {
	in := strings.NewReader(`# a trace mixing both line forms
0.5 alice
{"t": 0.75, "key": "bob", "n": 2, "path": "/upload"}
1e0 alice 0
`)
	r := trace.NewReader(in)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("line %d: t=%dns key=%q n=%d\n", ev.Line, ev.T, ev.Key, ev.N)
	}
	// Output:
	// line 2: t=500000000ns key="alice" n=1
	// line 3: t=750000000ns key="bob" n=2
	// line 4: t=1000000000ns key="alice" n=0
}

func ExampleReader_error() {
	r := trace.NewReader(strings.NewReader("10 alice\n9 alice\n"))
	r.Next()
	_, err := r.Next()
	fmt.Println(err)
	// Output:
	// line 2: time goes backwards: t 9 is before t 10 on line 1 (traces must be in time order)
}
