//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/procstate"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestLessonFrozenHolder plays etcd's frozen-holder story, then its fenced
// form, on a stack started as make up starts it, one click per step, and
// reads each claim from the stores themselves: A's replica is really
// stopped (its process's state 'T') when the story freezes it; while it is
// frozen, its lease runs out in etcd and the first key under the lock's
// prefix becomes B's; thawed, A's write lands (the stock 9 after both sold:
// one unit sold twice) or, fenced, is refused (the stock still 10, B the
// stock's newest holder). ZooKeeper's story sells one unit twice the same
// way (its session expired while frozen); db-getlock's turns B away at its
// deadline while A is frozen, and sells once. Last, a story left with A frozen is reset: A's
// replica runs again and its sale is cancelled. The ending at 1280 and 390
// px is kept as docs/lesson-etcd-*.png ($LAB_SCREENSHOTS).
func TestLessonFrozenHolder(t *testing.T) {
	bin := clusterBin(t)
	port := redistest.FreePort(t)
	c := up(t, bin, port, t.TempDir())
	rdb := redis.NewClient(&redis.Options{Addr: c.State.StockNode().Addr, Password: c.State.RedisPassword})
	defer rdb.Close()
	var eps []string
	for _, m := range c.State.Etcd {
		eps = append(eps, m.Addr)
	}
	ecli, err := clientv3.New(clientv3.Config{Endpoints: eps, Logger: zap.NewNop(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer ecli.Close()
	bg := context.Background()
	prefix := api.DefaultLockKey + "/"
	// first is the key holding etcd's lock now: the first under the
	// mutex's prefix ("": none).
	first := func() string {
		t.Helper()
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		resp, err := ecli.Get(ctx, prefix, clientv3.WithFirstCreate()...)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return ""
		}
		return string(resp.Kvs[0].Key)
	}
	ctx, problems := browser(t)
	if err := navigate(ctx, fmt.Sprintf("http://localhost:%d/", port)); err != nil {
		t.Fatal(err)
	}
	p := stepPage{t, ctx}
	// replicaOf names sale w's replica, as its lane says.
	replicaOf := func(w string) string {
		return p.eval(`document.querySelector("#lane-` + w + ` .who").textContent.match(/inventory-\d+/)?.[0] || ""`)
	}
	// stateOf is the process state of replica name ('T': stopped).
	stateOf := func(name string) byte {
		t.Helper()
		for _, r := range c.State.Replicas {
			if r.Name == name {
				st, err := procstate.State(r.Pid)
				if err != nil {
					t.Fatal(err)
				}
				return st
			}
		}
		t.Fatalf("no replica %q in the cluster", name)
		return 0
	}

	for _, story := range []string{"etcd", "etcd-fence"} {
		fence := story == "etcd-fence"
		p.open(story)
		p.click(0)
		p.click(1) // A takes the lock
		a := replicaOf("A")
		keyA := first()
		if keyA == "" || !strings.Contains(p.eval(`document.querySelector("#lane-A").textContent`), keyA) {
			t.Fatalf("%s: after A took the lock etcd's first key is %q: want A's (its Txn shown in its lane)", story, keyA)
		}
		for at := 2; at <= 4; at++ { // read, check, work: A stopped before its write
			p.click(at)
		}
		p.click(5) // A's replica frozen
		if st := stateOf(a); st != 'T' {
			t.Fatalf("%s: A's replica's state is %c after the freeze, want T (stopped)", story, st)
		}
		frozen := time.Now()
		waitFor(t, ctx, story+": A's lease counting down between the lanes", `document.querySelector("#store").dataset.owner === "A" && document.querySelector("#store .ttl") !== null && document.querySelector("#lane-A").dataset.frozen === "true"`)
		p.click(6) // offered once etcd has deleted A's key: its lease ran out
		if k := first(); k == keyA {
			t.Fatalf("%s: the wait for A's lease ended with A's key still first", story)
		}
		t.Logf("%s: A frozen, its key gone from etcd %s later", story, time.Since(frozen).Round(100*time.Millisecond))
		p.click(7) // B takes the lock
		keyB := first()
		if keyB == "" || keyB == keyA || stateOf(a) != 'T' || !strings.Contains(p.eval(`document.querySelector("#lane-B").textContent`), keyB) {
			t.Fatalf("%s: after B took the lock etcd's first key is %q (A's %q), A's replica %c: want B's key while A is still frozen", story, keyB, keyA, stateOf(a))
		}
		p.click(8) // B reads
		if got := p.done("B", "stock", 0, ".reply"); !strings.Contains(got, `"10"`) {
			t.Fatalf("%s: B read %s, want 10", story, got)
		}
		p.click(9) // A thawed
		if st := stateOf(a); st == 'T' {
			t.Fatalf("%s: A's replica still stopped after the thaw", story)
		}
		p.click(10) // A's write
		if !fence {
			if s := redisGetT(t, rdb, api.DefaultStockKey); s != "9" || p.eval(`document.querySelector("#lane-A li[data-mark=flaw]")?.textContent || ""`) == "" {
				t.Fatalf("etcd: after A's write Redis holds stock %s, want 9 (A's write landed on B's hold), marked", s)
			}
		} else {
			if s := redisGetT(t, rdb, api.DefaultStockKey); s != "10" || p.eval(`document.querySelector("#lane-A li[data-mark=fix]")?.textContent || ""`) == "" {
				t.Fatalf("etcd fenced: after A's write Redis holds stock %s: want A's write refused, the stock 10, the refusal marked", s)
			}
		}
		if k := first(); k != keyB {
			t.Fatalf("%s: after A's write etcd's first key is %q, want B's %q", story, k, keyB)
		}
		p.click(11)
		p.click(12)
		if fence {
			p.verdict("ok", "A's write was refused by the stock")
		} else {
			p.verdict("violated", "One unit sold twice")
			p.verdict("violated", "Two holders: A's replica was frozen")
		}
		if s := redisGetT(t, rdb, api.DefaultStockKey); s != "9" {
			t.Fatalf("%s: the story ended with stock %s, want 9", story, s)
		}
		locktest.WaitFor(t, 5*time.Second, story+": no key left under the lock's prefix", func() bool { return first() == "" })
		if !fence {
			p.shots("etcd")
		}
	}

	// ZooKeeper, in the same order: A's session expires while it is frozen
	// (the replica's -ttl, 20 s), its node goes, B's becomes the first.
	p.open("zk")
	for at := 0; at <= 5; at++ {
		p.click(at)
	}
	a := replicaOf("A")
	frozen := time.Now()
	p.click(6) // offered once A's node is gone: its session expired
	t.Logf("zk: A frozen, its node gone %s later", time.Since(frozen).Round(100*time.Millisecond))
	p.click(7)
	waitFor(t, ctx, "zk: B's node the first, A still frozen", `document.querySelector("#store").dataset.owner === "B"`)
	if st := stateOf(a); st != 'T' {
		t.Fatalf("zk: B took the lock with A's replica in state %c, want T", st)
	}
	for at := 8; at <= 12; at++ {
		p.click(at)
	}
	p.verdict("violated", "One unit sold twice")
	if s := redisGetT(t, rdb, api.DefaultStockKey); s != "9" {
		t.Fatalf("zk: the story ended with stock %s, want 9", s)
	}

	// db-getlock: no lease, so nothing runs out; B waits in GET_LOCK until
	// its deadline and sells nothing while A is frozen; A, thawed, sells.
	p.open("db-getlock")
	for at := 0; at <= 6; at++ {
		p.click(at)
	}
	a = replicaOf("A")
	if st, b := stateOf(a), p.lane("B"); st != 'T' || b != "done" || !strings.Contains(p.eval(`document.querySelector("#lane-B .result").textContent`), "lock") {
		t.Fatalf("db-getlock: B is %s (%s) with A's replica in state %c: want B turned away at its deadline while A is frozen", b, p.eval(`document.querySelector("#lane-B .result").textContent`), st)
	}
	if s := redisGetT(t, rdb, api.DefaultStockKey); s != "10" {
		t.Fatalf("db-getlock: B gave up with stock %s, want 10", s)
	}
	p.click(7)
	p.click(8)
	p.verdict("violated", "No oversell, but B was blocked")
	if s := redisGetT(t, rdb, api.DefaultStockKey); s != "9" {
		t.Fatalf("db-getlock: the story ended with stock %s, want 9 (sold once)", s)
	}

	// Left frozen, then reset: A's replica runs again, its sale cancelled.
	p.open("etcd")
	for at := 0; at <= 5; at++ {
		p.click(at)
	}
	a = replicaOf("A")
	if st := stateOf(a); st != 'T' {
		t.Fatalf("A's replica's state is %c after the freeze, want T", st)
	}
	p.eval(`document.querySelector("#steps-reset").click(), ""`)
	waitFor(t, ctx, "reset", `document.querySelector("#steps-panel").dataset.started === "false"`)
	if st := stateOf(a); st == 'T' {
		t.Fatal("A's replica still stopped after the reset")
	}
	locktest.WaitFor(t, 15*time.Second, "no key left under the lock's prefix after the reset", func() bool { return first() == "" })
	if p := problems(); len(p) > 0 {
		t.Fatalf("the page reported errors: %v", p)
	}
}
