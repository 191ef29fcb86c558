package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/dbtest"
	"github.com/locklab/locklab/internal/etcdtest"
	dblock "github.com/locklab/locklab/internal/locks/db"
	"github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/zktest"
)

// The lessons' store reads each family's own lock (GET /store?lock=NAME):
// nobody before, the holder's key, node or connection while it holds,
// each from a real etcd, ZooKeeper and MariaDB.
func TestHoldersReadEachStore(t *testing.T) {
	ctx := context.Background()
	zs, err := zk.Dial(zktest.Start(t, 1).Servers(), zk.SessionOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(zs.Close)
	db := dbtest.Start(t)
	deps := builder.Deps{Etcd: etcdtest.Start(t, 1).Client(), ZK: zs, DB: db.DB(), LockKey: "lesson"}
	h := holders(deps)
	for _, name := range []string{"etcd", "zk", "db-getlock"} {
		if got, err := h[name](ctx); got != nil || err != nil {
			t.Fatalf("%s before any hold: %+v, %v: want nobody", name, got, err)
		}
	}
	held, err := etcd.New(deps.Etcd, etcd.Options{Key: "lesson", TTL: 10 * time.Second}).Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	if got, err := h["etcd"](ctx); err != nil || got == nil || !strings.HasPrefix(got.Owner, "lesson/") || got.PTTLms <= 0 || got.PTTLms > 10000 {
		t.Fatalf("etcd while held: %+v, %v: want the holder's key with its lease's time left", got, err)
	}
	zheld, err := zk.New(zs, zk.Options{Key: "lesson"}).Acquire(ctx, "owner-a")
	if err != nil {
		t.Fatal(err)
	}
	defer zheld.Release(ctx)
	if got, err := h["zk"](ctx); err != nil || got == nil || got.Owner != "owner-a" || got.PTTLms != -1 {
		t.Fatalf("zk while held: %+v, %v: want owner-a's node, no lease of its own", got, err)
	}
	dheld, err := dblock.NewGetLock(db.Holds(), dblock.GetLockOptions{Key: "lesson"}).Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := h["db-getlock"](ctx); err != nil || got == nil || got.Owner == "" || got.Owner == "0" {
		t.Fatalf("db-getlock while held: %+v, %v: want the holding connection's id", got, err)
	}
	if err := dheld.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := h["db-getlock"](ctx); got != nil || err != nil {
		t.Fatalf("db-getlock after the release: %+v, %v: want nobody", got, err)
	}
}
