package client_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/locklab/locklab/internal/client"
	"github.com/valyala/fasthttp"
)

// The client beside fasthttp's own pool (which cannot stop a request: what
// the lanes cost) and beside net/http (the other stack, which can): 64
// callers at once, as the load test's workers, on one loopback server.
// go test -run - -bench . -cpu 2 ./internal/client/
func BenchmarkSend(b *testing.B) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"sold":true,"replica":"r1"}`))
	}))
	defer ts.Close()
	b.Run("client", func(b *testing.B) {
		svc := client.New(ts.URL, "")
		defer svc.Close()
		u := svc.URL("sale")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		b.SetParallelism(32) // x GOMAXPROCS callers
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := svc.Send(ctx, http.MethodPost, u, "id"); err != nil {
					b.Error(err)
				}
			}
		})
	})
	b.Run("fasthttp", func(b *testing.B) {
		c := &fasthttp.Client{MaxConnsPerHost: 64 * 4, NoDefaultUserAgentHeader: true}
		defer c.CloseIdleConnections()
		u := ts.URL + "/sale"
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
				req.SetRequestURI(u)
				req.Header.SetMethod(http.MethodPost)
				req.Header.Set("X-Request-Id", "id")
				if err := c.DoTimeout(req, resp, client.SaleTimeout); err != nil {
					b.Error(err)
				}
				fasthttp.ReleaseRequest(req)
				fasthttp.ReleaseResponse(resp)
			}
		})
	})
	b.Run("net-http", func(b *testing.B) {
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64 * 4}}
		defer c.CloseIdleConnections()
		u := ts.URL + "/sale"
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u, nil)
				req.Header.Set("X-Request-Id", "id")
				res, err := c.Do(req)
				if err != nil {
					b.Error(err)
					continue
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	})
}
