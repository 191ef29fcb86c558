package stepetcd_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/etcdtest"
	etcdlock "github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/step/stepetcd"
	"github.com/locklab/locklab/internal/step/steptest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// cluster is one real etcd member, a client with the gate (etcd.Dial's, as
// the replica's) and one without, to read what etcd holds.
func cluster(t *testing.T) (gated, plain *clientv3.Client) {
	t.Helper()
	c := etcdtest.Start(t, 1)
	gated, err := etcdlock.Dial(c.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gated.Close() })
	return gated, c.Client()
}

// keys are the keys under prefix, read by a client without the gate.
func keys(t *testing.T, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, kv := range resp.Kvs {
		ks = append(ks, string(kv.Key))
	}
	return ks
}

// An armed sale stops before each of its requests to etcd: the lease's
// grant, the mutex's transaction (its key not in etcd until it is let go),
// the release's transaction and the revocation, each recorded with its
// reply.
func TestStopsBeforeEachRequest(t *testing.T) {
	gated, plain := cluster(t)
	l := etcdlock.New(gated, etcdlock.Options{Key: "lock", TTL: 10 * time.Second})
	g := step.New(step.Options{})
	defer g.Close()

	a := steptest.Hold(t, g, "A", l.Acquire)
	st := a.State()
	if st.Next.Command != "LeaseGrant ttl=10" || st.Next.Phase != step.Acquire {
		t.Fatalf("A's first step is %+v, want LeaseGrant ttl=10 in acquire", st.Next)
	}
	st = steptest.Next(t, a, "stopped")
	lease := steptest.Match(t, "the grant's reply", st.Done[0].Reply, "lease ([0-9a-f]+) ttl=10")[1]
	pfx := l.Prefix() // the mutex's, under the lock's
	key := pfx + lease
	txn := fmt.Sprintf(`Txn if create_rev(%s) = 0 then Put %s "" lease=%s; Range %s* by create asc limit 1 else Range %s; Range %s* by create asc limit 1`, key, key, lease, pfx, key, pfx)
	if st.Next.Command != txn {
		t.Fatalf("A's second step is %q, want %q", st.Next.Command, txn)
	}
	if ks := keys(t, plain, l.Prefix()); len(ks) != 0 {
		t.Fatalf("A stopped before its transaction, yet etcd holds %v", ks)
	}
	st = steptest.Next(t, a, "stopped")
	rev := steptest.Match(t, "the transaction's reply", st.Done[1].Reply, `then: put at rev (\d+); \[`+regexp.QuoteMeta(key)+` created (\d+)\]`)[1]
	if ks := keys(t, plain, l.Prefix()); len(ks) != 1 || ks[0] != key {
		t.Fatalf("A took its step, etcd holds %v, want [%s]", ks, key)
	}
	release := fmt.Sprintf("Txn if create_rev(%s) = %s then DeleteRange %s", key, rev, key)
	if st.Next.Command != release || st.Next.Phase != step.Release {
		t.Fatalf("A's third step is %+v, want %q in release", st.Next, release)
	}
	st = steptest.Next(t, a, "stopped")
	if st.Done[2].Reply != "then: deleted 1" {
		t.Fatalf("the release answered %q, want then: deleted 1", st.Done[2].Reply)
	}
	if st.Next.Command != "LeaseRevoke "+lease {
		t.Fatalf("A's fourth step is %q, want LeaseRevoke %s", st.Next.Command, lease)
	}
	st = steptest.Next(t, a, "done")
	if st.Done[3].Reply != "OK" || len(st.Done) != 4 {
		t.Fatalf("A's steps are %+v, want 4 ending with the revocation's OK", st.Done)
	}
	if r := st.Result.(steptest.Held); r.Acquire != nil || r.Release != nil {
		t.Fatalf("A: %+v", r)
	}
}

// B, stepped while A holds the lock, shows the waiter's requests: its key
// put behind A's, the Range that finds A's key before its own; then it
// waits (its watch is the client's own, unseen) until A releases, and its
// last request reads its own key.
func TestWaiterShowsItsQueue(t *testing.T) {
	gated, _ := cluster(t)
	l := etcdlock.New(gated, etcdlock.Options{Key: "lock", TTL: 10 * time.Second})
	g := step.New(step.Options{})
	defer g.Close()

	a := steptest.Hold(t, g, "A", l.Acquire)
	steptest.Next(t, a, "stopped")
	st := steptest.Next(t, a, "stopped") // A holds, stopped before its release
	pfx := l.Prefix()
	aKey := pfx + steptest.Match(t, "A's grant", st.Done[0].Reply, "lease ([0-9a-f]+) ttl=10")[1]

	b := steptest.Hold(t, g, "B", l.Acquire)
	st = steptest.Next(t, b, "stopped")
	bKey := pfx + steptest.Match(t, "B's grant", st.Done[0].Reply, "lease ([0-9a-f]+) ttl=10")[1]
	st = steptest.Next(t, b, "stopped")
	aRev := steptest.Match(t, "B's transaction's reply", st.Done[1].Reply, `then: put at rev (\d+); \[`+regexp.QuoteMeta(aKey)+` created (\d+)\] of 2 keys`)[2]
	steptest.Match(t, "B's next step", st.Next.Command, `Range `+regexp.QuoteMeta(pfx)+`\* by create desc limit 1 created<=\d+`)
	if err := b.Next(); err != nil {
		t.Fatal(err)
	}
	// B waits on A's key's deletion: running, no step pending, its Range
	// answered A's key.
	st = b.Settle(context.Background(), time.Second)
	if st.State != "running" || len(st.Done) != 3 {
		t.Fatalf("B should wait for A, it is %+v", st)
	}
	steptest.Match(t, "B's Range's reply", st.Done[2].Reply, `\[`+regexp.QuoteMeta(aKey)+` created `+aRev+`\]`)

	a.End()
	steptest.Settle(t, a, "done")
	st = steptest.Settle(t, b, "stopped") // woken: it looks again for a key before its own
	steptest.Match(t, "B's step once woken", st.Next.Command, `Range `+regexp.QuoteMeta(pfx)+`\* by create desc limit 1 created<=\d+`)
	st = steptest.Next(t, b, "stopped")
	if st.Done[len(st.Done)-1].Reply != "(none)" || st.Next.Command != "Range "+bKey {
		t.Fatalf("B found %q before its own key and stops before %q, want (none) and Range %s", st.Done[len(st.Done)-1].Reply, st.Next.Command, bKey)
	}
	b.End()
	st = steptest.Settle(t, b, "done")
	if r := st.Result.(steptest.Held); r.Acquire != nil || r.Release != nil {
		t.Fatalf("B: %+v", r)
	}
}

// The lock's own keep-alives, sent from another goroutine while the holder
// is stopped, are shown as background steps and never stopped: the lease
// lives on while the learner looks.
func TestKeepAliveIsBackground(t *testing.T) {
	gated, plain := cluster(t)
	l := etcdlock.New(gated, etcdlock.Options{Key: "lock", TTL: 3 * time.Second}) // a keep-alive every second
	g := step.New(step.Options{})
	defer g.Close()

	a := steptest.Hold(t, g, "A", l.Acquire)
	steptest.Next(t, a, "stopped")
	st := steptest.Next(t, a, "stopped")
	leaseID := steptest.Match(t, "A's grant", st.Done[0].Reply, "lease ([0-9a-f]+) ttl=3")[1]
	var bg []step.Step
	for deadline := time.Now().Add(10 * time.Second); len(bg) < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("no three background keep-alives within 10 s while A is stopped: %+v", a.State())
		}
		time.Sleep(50 * time.Millisecond) // polling the observable state
		bg = nil
		for _, d := range a.State().Done {
			if d.Phase == step.Background {
				bg = append(bg, d)
			}
		}
	}
	for _, d := range bg {
		if d.Command != "LeaseKeepAlive "+leaseID || d.Reply != "ttl=3" {
			t.Fatalf("a background step is %+v, want LeaseKeepAlive %s -> ttl=3", d, leaseID)
		}
	}
	if st := a.State(); st.State != "stopped" || !strings.HasPrefix(st.Next.Command, "Txn if create_rev("+l.Prefix()+leaseID) {
		t.Fatalf("A should still be stopped before its release, it is %+v", st)
	}
	if ks := keys(t, plain, l.Prefix()); len(ks) != 1 { // past the 3 s lease: kept alive
		t.Fatalf("A's key should live on, etcd holds %v", ks)
	}
	a.End()
	if r := steptest.Settle(t, a, "done").Result.(steptest.Held); r.Acquire != nil || r.Release != nil {
		t.Fatalf("A: %+v", r)
	}
}

// A sale that is not armed goes through the gate without stopping, and a
// reset sale sends nothing more but its release.
func TestUnarmedNeverStops(t *testing.T) {
	gated, plain := cluster(t)
	l := etcdlock.New(gated, etcdlock.Options{Key: "lock", TTL: 10 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		ls, err := l.Acquire(ctx, "plain")
		if err != nil {
			t.Fatal(err)
		}
		if ks := keys(t, plain, l.Prefix()); len(ks) != 1 {
			t.Fatalf("held, etcd holds %v", ks)
		}
		if err := ls.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if ks := keys(t, plain, l.Prefix()); len(ks) != 0 {
		t.Fatalf("released, etcd holds %v", ks)
	}
}

// A learner who waits longer than a request's own bound (RequestTimeout)
// before letting it go still has it answered: the time stopped is not the
// request's.
func TestStoppedLongerThanTheRequestBound(t *testing.T) {
	if testing.Short() {
		t.Skip("waits RequestTimeout")
	}
	gated, _ := cluster(t)
	l := etcdlock.New(gated, etcdlock.Options{Key: "lock", TTL: 10 * time.Second})
	g := step.New(step.Options{})
	defer g.Close()
	a := steptest.Hold(t, g, "A", l.Acquire)
	time.Sleep(etcdlock.RequestTimeout + time.Second) // the learner reading: the time itself is the test
	a.End()
	if r := steptest.Settle(t, a, "done").Result.(steptest.Held); r.Acquire != nil || r.Release != nil {
		t.Fatalf("A stopped %s before its grant: %+v", etcdlock.RequestTimeout+time.Second, r)
	}
}

// BenchmarkUnaryUnarmed is the gate's own cost per request for an unarmed
// request, without I/O: the context lookup in a request-sized context.
func BenchmarkUnaryUnarmed(b *testing.B) {
	ctx := context.Background()
	for range 8 {
		ctx = context.WithValue(ctx, new(int), 1)
	}
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	b.Run("no-gate", func(b *testing.B) {
		for b.Loop() {
			_ = invoker(ctx, "/etcdserverpb.KV/Range", nil, nil, nil)
		}
	})
	b.Run("gate-unarmed", func(b *testing.B) {
		for b.Loop() {
			_ = stepetcd.Unary(ctx, "/etcdserverpb.KV/Range", nil, nil, nil, invoker)
		}
	})
}

// BenchmarkLock is one acquisition and release of the etcd lock on a real
// etcd through a client without the gate and one with it, unarmed: the
// difference must be within noise (issue 45).
func BenchmarkLock(b *testing.B) {
	c := etcdtest.Start(b, 1)
	for _, gated := range []bool{false, true} {
		name, cfg := "no-gate", clientv3.Config{Endpoints: c.Endpoints(), Logger: zap.NewNop()}
		if gated {
			name, cfg.DialOptions = "gate-unarmed", stepetcd.DialOptions()
		}
		cli, err := clientv3.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer cli.Close()
		l := etcdlock.New(cli, etcdlock.Options{Key: "bench-" + name, TTL: 10 * time.Second})
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			for b.Loop() {
				ls, err := l.Acquire(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if err := ls.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A stepped sale's lease counts from the grant the learner let go, not from
// before the gate: stopped before its grant longer than the lease, it still
// gets a whole lease once granted. (Counted from before, the lease was lost
// the moment it was granted, and the sale answered lease_lost.)
func TestLeaseCountsFromTheGrant(t *testing.T) {
	if testing.Short() {
		t.Skip("waits longer than a lease")
	}
	gated, _ := cluster(t)
	l := etcdlock.New(gated, etcdlock.Options{Key: "lock", TTL: 2 * time.Second})
	g := step.New(step.Options{})
	defer g.Close()
	s := steptest.Hold(t, g, "A", l.Acquire)
	time.Sleep(3 * time.Second) // the learner reading, longer than the 2 s lease: the time itself is the test
	if err := s.End(); err != nil {
		t.Fatal(err)
	}
	if r := steptest.Settle(t, s, "done").Result.(steptest.Held); r.Acquire != nil || r.Release != nil || r.LostAtGrant {
		t.Fatalf("A stopped 3 s before its grant of a 2 s lease, then let go: %+v, want a lease not lost at its grant", r)
	}
}
