package trace_test

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/floodgate/floodgate/trace"
)

func ExampleAccessLog() {
	log := `127.0.0.1 - frank [10/Oct/2000:13:55:36 -0700] "GET /a.gif HTTP/1.0" 200 2326 "-" "curl/8.5.0"
10.1.2.3 - - [10/Oct/2000:13:55:38 -0700] "GET /b?page=2 HTTP/1.1" 200 51 "-" "curl/8.5.0"
127.0.0.1 - frank [10/Oct/2000:13:55:37 -0700] "POST /upload HTTP/1.0" 201 0 "-" "curl/8.5.0"
`
	r := trace.NewReader(strings.NewReader(log))
	// A server stamps a request when it begins and logs it when it ends,
	// so the upload logged third began before the second request:
	// InOrder takes it at the second's time.
	order := &trace.InOrder{Format: trace.AccessLog{Combined: true, Key: trace.LogPath}.Parse}
	r.Format = order.Parse
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		t := time.Unix(0, ev.T).UTC() // the access log's times are Unix times
		fmt.Printf("line %d: t=%s key=%q n=%d\n", ev.Line, t.Format(time.RFC3339), ev.Key, ev.N)
	}
	fmt.Printf("%d moved, by at most %v\n", order.Moved, time.Duration(order.MaxMove))
	// Output:
	// line 1: t=2000-10-10T20:55:36Z key="/a.gif" n=1
	// line 2: t=2000-10-10T20:55:38Z key="/b" n=1
	// line 3: t=2000-10-10T20:55:38Z key="/upload" n=1
	// 1 moved, by at most 1s
}
