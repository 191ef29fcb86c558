package scenario

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/client"
	"github.com/locklab/locklab/internal/servicetest"
)

// A scenario's sale goes through the service's client to a real replica:
// a sale, a sold-out refusal (a reply, not an error) and a refused request
// (an error: the fault hooks are off), each read as the scenarios count it,
// with the cell's request ids; the history read back holds the cell's sales.
func TestSellThroughTheClient(t *testing.T) {
	ctx := context.Background()
	base := servicetest.Start(t, "r1")
	e := Env{URL: base + "/sale", Client: client.New("", ""), cell: "cell1", seq: new(atomic.Int64)}
	since := time.Now()
	if err := e.at(e.URL).SetStock(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if r := <-e.sell(ctx, "v6", ""); r.err != nil || r.status != http.StatusOK || r.outcome != api.Sold {
		t.Fatalf("first sale: %+v", r)
	}
	if r := <-e.sellAt(ctx, base+"/replica/r1/sale", "v6", ""); r.err != nil || r.status != http.StatusConflict || r.code != api.CodeSoldOut || r.outcome != api.SoldOut {
		t.Fatalf("a sale of no stock: %+v", r)
	}
	if r := <-e.sell(ctx, "no-such-version", ""); r.err == nil || !strings.Contains(r.err.Error(), "refused") || r.status != http.StatusBadRequest {
		t.Fatalf("a refused request: %+v", r)
	}
	e.Replicas = [2]Replica{{Name: "r1", URL: base + "/sale"}, {Name: "r1", URL: base + "/replica/r1/sale"}}
	_, sales, err := e.evidence(ctx, since)
	if err != nil || len(sales) != 4 || sales[0].ID != "cell1-1" { // the one replica, read twice
		t.Fatalf("the cell's history: %d sales (%v), %v", len(sales), sales, err)
	}
}
