package stores

import (
	"context"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/internal/etcdtest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/scenario"
	"github.com/redis/go-redis/v9"
)

// Held sees each lock where it lives, and Clear frees it there with the
// Redis queues, against a real redis-server and etcd (a stack with no
// ensemble and no database: Has says so, and the db and zk locks are
// refused with a reason, not read as free).
func TestHeldAndClear(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	ec := etcdtest.Start(t, 1)
	st, err := Open(scenario.Services{Redis: rdb, LockKey: "lk", Etcd: ec.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if st.Has("zk") || st.Has("db") {
		t.Fatalf("Has: zk %v, db %v on a stack with neither", st.Has("zk"), st.Has("db"))
	}
	for _, lock := range []string{"zk", "db", "db-getlock"} {
		if _, err := st.Held(ctx, lock); err == nil {
			t.Errorf("Held(%s) on a stack without its service: no error", lock)
		}
	}
	queue, passed := st.WaitKeys("handoff")
	nqueue, npassed := st.WaitKeys("notify")
	if queue == nqueue || passed == npassed || queue == passed {
		t.Errorf("WaitKeys: handoff %s %s, notify %s %s: want four keys", queue, passed, nqueue, npassed)
	}

	for _, lock := range []string{"v6", "rueidislock", "rueidislock-1"} {
		keys := st.LockKeys(lock)
		if err := rdb.Set(ctx, keys[len(keys)-1], "owner", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.ZAdd(ctx, queue, redisZ("w")).Err(); err != nil {
			t.Fatal(err)
		}
		held(t, st, lock, true)
		if err := st.Clear(ctx, lock); err != nil {
			t.Fatal(err)
		}
		held(t, st, lock, false)
		if n := rdb.Exists(ctx, queue).Val(); n != 0 {
			t.Errorf("%s: Clear left the hand-off queue", lock)
		}
	}

	cli, err := clientv3.New(clientv3.Config{Endpoints: ec.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Put(ctx, "lk/694d", ""); err != nil {
		t.Fatal(err)
	}
	held(t, st, "etcd", true)
	held(t, st, "v6", false) // etcd's keys are not Redis's
	if err := st.Clear(ctx, "etcd"); err != nil {
		t.Fatal(err)
	}
	held(t, st, "etcd", false)
	member, leader, err := st.EtcdStatus(ctx, ec.Endpoints()[0])
	if err != nil || member == 0 || member != leader {
		t.Errorf("EtcdStatus of a one-member cluster: member %x, leader %x, %v: want itself", member, leader, err)
	}
}

func held(t *testing.T, st scenario.Stores, lock string, want bool) {
	t.Helper()
	got, err := st.Held(context.Background(), lock)
	if err != nil || got != want {
		t.Errorf("Held(%s) = %v, %v; want %v", lock, got, err, want)
	}
}

func redisZ(member string) redis.Z { return redis.Z{Score: 1, Member: member} }
