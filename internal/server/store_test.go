package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/etcdtest"
	"github.com/locklab/locklab/internal/lease"
	etcdlock "github.com/locklab/locklab/internal/locks/etcd"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// GET /store?lock=etcd adds the lock as etcd holds it: A's key, holding,
// then B's, waiting, each with its lease's time left; a Redis version adds
// nothing (its key is the store's lock); a name no version has is a 400.
func TestStoreQueue(t *testing.T) {
	var cli *clientv3.Client
	s := newStack(t, options{lock: "etcd", override: true, etcd: func(_ *etcdtest.Cluster, c *clientv3.Client) { cli = c }})
	ctx := context.Background()
	r := s.do(t, "GET", "/store?lock=etcd", "")
	s.expect(t, r, 200, nil)
	if q, _ := r.body["queue"].(map[string]any); q == nil || q["lock"] != "etcd" || len(q["entries"].([]any)) != 0 {
		t.Fatalf("a free etcd lock: %v, want its queue, empty", r.body)
	}
	lock := func() *etcdlock.Locker {
		return etcdlock.New(cli, etcdlock.Options{Key: api.DefaultLockKey, TTL: 10 * time.Second})
	}
	a, err := lock().Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan lease.Lease, 1)
	go func() {
		b, err := lock().Acquire(wctx, "b")
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	var entries []any
	for deadline := time.Now().Add(10 * time.Second); len(entries) != 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("B's key never came: %v", r.body)
		}
		r = s.do(t, "GET", "/store?lock=etcd", "")
		s.expect(t, r, 200, nil)
		entries = r.body["queue"].(map[string]any)["entries"].([]any)
	}
	first, second := entries[0].(map[string]any), entries[1].(map[string]any)
	if first["holds"] != true || second["holds"] != false || !strings.HasPrefix(first["key"].(string), r.body["queue"].(map[string]any)["where"].(string)) ||
		first["pttl_ms"].(float64) <= 0 || second["revision"].(float64) <= first["revision"].(float64) {
		t.Fatalf("A holding then B waiting: %v", entries)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := <-got
	defer b.Release(ctx)

	r = s.do(t, "GET", "/store?lock=v4", "")
	s.expect(t, r, 200, map[string]any{"queue": nil})
	s.expect(t, s.do(t, "GET", "/store?lock=nope", ""), 400, map[string]any{"code": api.CodeUnknownLock})
}

// A version whose lock service is not configured answers as its sales do.
func TestStoreQueueNoService(t *testing.T) {
	s := newStack(t, options{lock: "etcd", override: true, noEtcd: true})
	s.expect(t, s.do(t, "GET", "/store?lock=etcd", ""), 503, map[string]any{"code": api.CodeUnavailable})
}
