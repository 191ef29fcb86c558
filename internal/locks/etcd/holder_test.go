package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/locks/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Holder names the first key under the prefix (the holder's, not a waiter's
// behind it) with its lease's time left; nobody once it is released.
func TestHolder(t *testing.T) {
	ctx := context.Background()
	cli, g, held := holding(t, false)
	keys, err := cli.Get(ctx, g.Prefix(), clientv3.WithPrefix())
	if err != nil || len(keys.Kvs) != 1 {
		t.Fatalf("keys under the prefix: %v (err %v), want the holder's", keys.Kvs, err)
	}
	waiter := etcd.New(cli, etcd.Options{Key: "lock", TTL: 10 * time.Second})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = waiter.Acquire(wctx, "b") }()
	for n := 0; n < 2; { // the waiter's key queued behind the holder's
		resp, err := cli.Get(ctx, g.Prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if n = int(resp.Count); n < 2 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	key, left, ok, err := g.Holder(ctx)
	if err != nil || !ok || key != string(keys.Kvs[0].Key) || left <= 0 || left > 10*time.Second {
		t.Fatalf("Holder: %q, %v left, ok %v, err %v: want %s with at most 10 s left", key, left, ok, err, keys.Kvs[0].Key)
	}
	cancel()
	release(t, held)
	for {
		resp, err := cli.Get(ctx, g.Prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		if resp.Count == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if key, _, ok, err := g.Holder(ctx); ok || err != nil {
		t.Fatalf("Holder after the release: %q, ok %v, err %v: want nobody", key, ok, err)
	}
}
