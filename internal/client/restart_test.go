package client_test

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/locklab/locklab/internal/client"
)

// A sale sent after its server restarted on the same address is served by
// the new one: the connection the old one closed while idle is not used
// (a POST that failed on it is not sent again). The scenarios kill and
// restart a replica and sell to it next (dead-waiter-handoff's second cell
// failed so: "the waiter to die never queued").
func TestSaleAfterTheServerRestarted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	serve := func(ln net.Listener, who string) *http.Server {
		s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"sold":true,"lock":"v6","replica":"` + who + `"}`))
		})}
		go func() { _ = s.Serve(ln) }()
		return s
	}
	first := serve(ln, "first")
	c := client.New("http://"+addr, "")
	defer c.Close()
	ctx := context.Background()
	for _, want := range []string{"first", "second"} {
		r, err := c.Sale(ctx, client.Query{Lock: "v6"}, "")
		if err != nil || r.Replica != want {
			t.Fatalf("sale to the %s server: %+v, %v", want, r, err)
		}
		if want == "second" {
			break
		}
		_ = first.Close() // closes its idle connections: the client's is one
		ln2, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer serve(ln2, "second").Close()
	}
}
