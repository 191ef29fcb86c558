package builder_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// Every catalogued version is built, and nothing else is: the -lock flag, the
// load test and the report all read the catalogue.
func TestBuildMatchesCatalogue(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: clients connect lazily
	defer rdb.Close()
	methods := builder.Build(builder.Deps{Redis: rdb, Redlock: []redis.UniversalClient{rdb}}, versions.Variant{Wait: "poll", Fence: true})
	var built []string
	for name, m := range methods {
		if m.Name != name {
			t.Errorf("methods[%q].Name = %q", name, m.Name)
		}
		// Fenced exactly where a lock service can issue tokens.
		// Fences, which the load test and the lab ask before a fenced run,
		// says so too.
		if v, _ := versions.Lookup(name); (m.Fence != "") != (m.Lock != nil && v.Safe && !v.OneReplica && !v.NoToken) || (m.Fence != "") != v.Fences() {
			t.Errorf("%s: Fence = %q, Fences() = %v", name, m.Fence, v.Fences())
		}
		built = append(built, name)
	}
	want := versions.Names()
	slices.Sort(built)
	slices.Sort(want)
	if !slices.Equal(built, want) {
		t.Fatalf("built %v, catalogue %v", built, want)
	}
	for _, v := range versions.All {
		if v.Fixes == "" || v.Flaw == "" || v.Guard == "" {
			t.Errorf("%s is not fully described", v.Name)
		}
	}
}

// The versions the catalogue says wait as -wait says are exactly those built
// to wait so, for every wait.
func TestWaitMatchesCatalogue(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	defer rdb.Close()
	n := retry.NewNotifier(context.Background(), rdb, "lock", time.Hour, 0, nil)
	defer n.Close()
	for _, wait := range versions.Waits {
		methods := builder.Build(builder.Deps{Redis: rdb, Redlock: []redis.UniversalClient{rdb}, Notifier: n}, versions.Variant{Wait: wait})
		for _, v := range versions.All {
			if got := methods[v.Name].Wait == wait && wait != "poll"; got != (v.Wait && wait != "poll") {
				t.Errorf("-wait %s: %s waits %q; catalogue says wait=%v", wait, v.Name, methods[v.Name].Wait, v.Wait)
			}
			if !v.Wait && methods[v.Name].Wait != v.Waits {
				t.Errorf("-wait %s: %s waits %q; catalogue says waits %q", wait, v.Name, methods[v.Name].Wait, v.Waits)
			}
		}
	}
}

// The catalogue's needs is exactly which versions a replica without a
// database (-db) or a ZooKeeper ensemble (-zk) cannot run: built without
// them, those and only those answer that they are missing.
func TestNeedsMatchesBuild(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetries: 1, DialerRetryTimeout: time.Millisecond, MaxRetries: -1}) // never answers, at once
	defer rdb.Close()
	methods := builder.Build(builder.Deps{Redis: rdb, Redlock: []redis.UniversalClient{rdb}}, versions.Variant{Wait: "poll"})
	for _, v := range versions.All {
		m := methods[v.Name]
		if m.Lock == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		_, err := m.Lock.Acquire(ctx, "owner")
		cancel()
		if got := map[bool]string{errors.Is(err, builder.ErrNoDB): "db", errors.Is(err, builder.ErrNoZK): "zk"}[true]; got != v.Needs {
			t.Errorf("%s built without -db and -zk: %v; catalogue says needs %q", v.Name, err, v.Needs)
		}
	}
}

// Every version whose lock a lock service keeps (etcd, and every version
// on the database or ZooKeeper) has its queue read for the store panel,
// answering its service's error when the service has none, as its sales do;
// every other version, whose lock is a Redis key, has none.
func TestQueuesCoverTheLockServices(t *testing.T) {
	q := builder.NewQueues(builder.Deps{})
	for _, name := range versions.Names() {
		got, err := q.ReadQueue(context.Background(), name)
		want := map[string]error{"db": builder.ErrNoDB, "zk": builder.ErrNoZK}[versions.Needs(name)]
		if name == "etcd" {
			want = builder.ErrNoEtcd
		}
		if got != nil || !errors.Is(err, want) {
			t.Errorf("%s's queue with no service: %+v, %v; want the error %v", name, got, err, want)
		}
	}
}
