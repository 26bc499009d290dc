package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/floodgate/floodgate/memstore"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/server"
)

func Example() {
	// A floodgate server, as floodgate serve runs one, with one policy.
	cfg, _ := server.ParseConfig([]byte("policies: {login: fixed-window 2/1h}"), "")
	srv, _ := server.New(memstore.New(0), cfg)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	c, err := client.New(hs.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for range 3 {
		d, err := c.Check(ctx, "login", "alice")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(d.Allowed, d.Remaining)
	}
	_, err = c.Check(ctx, "signup", "alice")
	fmt.Println(err)
	// Output:
	// true 1
	// true 0
	// false 0
	// floodgate server: 400 Bad Request: unknown policy "signup" (see GET /v1/policies)
}
