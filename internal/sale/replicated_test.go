package sale_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
)

// With ReplicaAck a sale is reported sold only once a replica has its
// write: with the replica in sync it sells; with the replica gone the write
// stands on the primary but the sale is ErrIndeterminate (a failover could
// lose it), for a locked sale and the atomic one alike; with no
// acknowledgement asked for it sells as before. The request's replica_ack
// hook asks for it too.
func TestSoldOnlyOnceReplicated(t *testing.T) {
	ctx := context.Background()
	primary := redistest.Start(t)
	replica := redistest.StartReplica(t, primary)
	rdb := primary.Client()
	setStock(t, rdb, 10)
	acked := sale.New(rdb, sale.Options{Key: key, AcquireTimeout: time.Second, ReplicaAck: 1})
	plain := sale.New(rdb, sale.Options{Key: key, AcquireTimeout: time.Second})
	locked := sale.Method{Name: "v6", Lock: v6(rdb, "lock", 10*time.Second)}
	atomic := sale.Method{Name: "atomic", Atomic: true}

	for _, m := range []sale.Method{locked, atomic} {
		res, err := acked.Sell(ctx, m)
		if err != nil {
			t.Fatalf("%s with the replica in sync: %v", m.Name, err)
		}
		if got := replica.Client().Get(ctx, key).Val(); got != strconv.FormatInt(res.Remaining, 10) {
			t.Fatalf("%s: sold, remaining %d, but the replica has %q", m.Name, res.Remaining, got)
		}
	}
	replica.Stop()
	for _, c := range []struct {
		svc *sale.Service
		ctx context.Context
		m   sale.Method
	}{
		{acked, ctx, locked}, {acked, ctx, atomic},
		{plain, chaos.With(ctx, chaos.Faults{ReplicaAck: 1}), locked},
	} {
		before := stock(t, rdb)
		res, err := c.svc.Sell(c.ctx, c.m)
		if !errors.Is(err, sale.ErrIndeterminate) || !strings.Contains(err.Error(), "0 of 1") {
			t.Fatalf("%s with the replica gone: %v, want ErrIndeterminate (0 of 1)", c.m.Name, err)
		}
		if stock(t, rdb) != before-1 || res.Trace.Written.At.IsZero() {
			t.Fatalf("%s: the write should stand on the primary (and be traced): stock %d -> %d", c.m.Name, before, stock(t, rdb))
		}
	}
	if _, err := plain.Sell(ctx, locked); err != nil {
		t.Fatalf("with no acknowledgement asked: %v", err)
	}
}
