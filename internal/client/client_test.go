package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/client"
	"github.com/locklab/locklab/internal/servicetest"
	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine they started runs on, but the
// ones the client keeps by design (servicetest.ClientGoroutines).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, servicetest.ClientGoroutines...) }

// Every call against a real replica, and its error replies as typed errors
// carrying the server's code and status.
func TestCallsAReplica(t *testing.T) {
	ctx := context.Background()
	svc, err := client.ForSale(servicetest.Start(t, "r1")+"/sale", "")
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	h, err := svc.Health(ctx)
	if err != nil || h.Replica != "r1" || h.StockKey == "" || h.Settings["lock"] != "v1" {
		t.Fatalf("health %+v, %v", h, err)
	}
	if err := svc.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	if err := svc.SetStock(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if n, err := svc.Stock(ctx); n != 1 || err != nil {
		t.Fatalf("stock %d, %v; want 1", n, err)
	}
	since := time.Now()
	r, err := svc.Replica("r1").Sale(ctx, client.Query{Lock: "v6"}, "run1-1")
	if err != nil || !r.Sold || r.Remaining == nil || *r.Remaining != 0 || r.Replica != "r1" || r.Outcome() != api.Sold {
		t.Fatalf("sale %+v, %v; want sold, 0 left", r, err)
	}
	r, err = svc.Sale(ctx, client.Query{Lock: "v6"}, "run1-2")
	var e *client.Error
	if !errors.As(err, &e) || e.Code != api.CodeSoldOut || e.Status != api.Status(api.CodeSoldOut) || r.Outcome() != api.SoldOut ||
		client.CodeOf(err) != api.CodeSoldOut || client.StatusOf(err) != http.StatusConflict {
		t.Fatalf("a sale of no stock: %+v, %v; want a sold_out error reply", r, err)
	}
	if _, err := svc.Sale(ctx, client.Query{Lock: "no-such-version"}, ""); client.CodeOf(err) != api.CodeUnknownLock || client.StatusOf(err) != http.StatusBadRequest {
		t.Fatalf("an unknown version: %v; want %s, 400", err, api.CodeUnknownLock)
	}
	if err := svc.At(svc.URL("nope")).Ready(ctx); client.CodeOf(err) != api.CodeNotFound || client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("no such endpoint: %v; want %s, 404", err, api.CodeNotFound)
	}
	sales, err := svc.Replica("r1").History(ctx, since, "run1")
	if err != nil || len(sales) != 2 || sales[0].ID != "run1-1" {
		t.Fatalf("history %+v, %v; want the run's two sales", sales, err)
	}
	page, err := svc.HistoryPage(ctx, 0, 1)
	if err != nil || len(page.Sales) != 1 || page.Last < 2 {
		t.Fatalf("a page of one: %+v, %v", page, err)
	}
}

// A reply that is no api.Error (nginx's own 502 page) is an *Error with its
// status and body, and no code.
func TestErrorReplyWithoutCode(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "<html>502 Bad Gateway</html>", http.StatusBadGateway)
	}))
	defer ts.Close()
	svc := client.New(ts.URL, "")
	defer svc.Close()
	_, err := svc.Health(context.Background())
	var e *client.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadGateway || e.Code != "" || !strings.Contains(e.Body, "502 Bad Gateway") {
		t.Fatalf("%#v; want a 502 with its body", err)
	}
	r, err := svc.Send(context.Background(), http.MethodPost, svc.URL("sale"), "")
	if r.Status != http.StatusBadGateway || r.Outcome() != api.Unknown || client.StatusOf(err) != http.StatusBadGateway {
		t.Fatalf("a sale nginx answered 502: %+v, %v; want its outcome unknown", r, err)
	}
}

func TestForSaleWantsTheSaleEndpoint(t *testing.T) {
	for _, u := range []string{"localhost/sale", "http://localhost/stock", "http://localhost/"} {
		if _, err := client.ForSale(u, ""); err == nil {
			t.Errorf("%s: accepted", u)
		}
	}
	c, err := client.ForSale("http://localhost:8080/x/sale?lock=v1", "")
	if err != nil || c.URL("stock") != "http://localhost:8080/x/stock" || c.Replica("a b").URL("sale") != "http://localhost:8080/x/replica/a%20b/sale" {
		t.Fatalf("%v", err)
	}
	if u := c.SaleURL(client.Query{Lock: "v6", Wait: "notify", Fence: true, Hooks: "hold=1s"}); u != "http://localhost:8080/x/sale?fence=1&lock=v6&wait=notify&hold=1s" {
		t.Fatalf("sale URL %s", u)
	}
}

// A call whose context ends in flight returns at once with the context's
// error, and its connection is closed: the service sees its client go. The
// other calls on the client go on.
func TestCallStopsWithItsContext(t *testing.T) {
	var gone atomic.Int64
	arrived := make(chan struct{}, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			return
		}
		arrived <- struct{}{}
		<-r.Context().Done() // the client's connection closed
		gone.Add(1)
	}))
	defer ts.Close()
	svc := client.New(ts.URL, "")
	defer svc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := svc.Sale(ctx, client.Query{}, "")
		done <- err
	}()
	<-arrived
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%v; want the context's cancellation", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sale runs on 10 s after its context ended")
	}
	tctx, tcancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer tcancel()
	if _, err := svc.Health(tctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call past its deadline: %v", err)
	}
	if err := svc.Ready(context.Background()); err != nil {
		t.Fatalf("the client after two ended calls: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); gone.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond) // polls what the server observed
	}
	if gone.Load() != 2 {
		t.Fatalf("the server saw %d of 2 clients go", gone.Load())
	}
}
