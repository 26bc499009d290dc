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

func ExampleParseSeconds() {
	for _, s := range []string{"12.345", "1.5e3", "0.0000000005", "-1"} {
		ns, err := trace.ParseSeconds(s)
		fmt.Println(ns, err)
	}
	// Output:
	// 12345000000 <nil>
	// 1500000000000 <nil>
	// 1 <nil>
	// 0 "-1": out of range (want 0 to 4611686018.427387904 seconds)
}

func ExampleAppendSeconds() {
	for _, ns := range []int64{43_000_000_000, 500_000_000, 1, 0} {
		fmt.Println(string(trace.AppendSeconds(nil, ns)))
	}
	// Output:
	// 43
	// 0.5
	// 0.000000001
	// 0
}
