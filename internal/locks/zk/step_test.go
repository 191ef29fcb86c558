package zk_test

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/step/steptest"
	"github.com/locklab/locklab/internal/zktest"
)

// A stepped sale stops before each of the recipe's requests to ZooKeeper
// (its node's create, not made until let go; the queue's read; the delete)
// and records each with its reply; B, queued behind A, shows the watch it
// sets on A's node, waits, and is woken by A's delete. A sale not armed
// never stops.
func TestStepsEachRequest(t *testing.T) {
	e := zktest.Start(t, 1)
	s := session(t, e, zk.SessionOptions{Timeout: 10 * time.Second})
	l := zk.New(s, zk.Options{Key: "lock"})
	g := step.New(step.Options{})
	defer g.Close()
	dir := regexp.QuoteMeta(l.Dir())

	a := steptest.Hold(t, g, "A", l.Acquire)
	steptest.Match(t, "A's first step", a.State().Next.Command, "create "+dir+`/[0-9a-f]+-lock- "A" ephemeral sequential`)
	if c := children(t, e, l.Dir()); len(c) != 0 {
		t.Fatalf("A stopped before its create, yet the lock holds %v", c)
	}
	st := steptest.Next(t, a, "stopped")
	aNode := steptest.Match(t, "A's create's reply", st.Done[0].Reply, dir+`/([0-9a-f]+-lock-\d{10})`)[1]
	if c := children(t, e, l.Dir()); !slices.Equal(c, []string{aNode}) {
		t.Fatalf("A's create let go, the lock holds %v, want [%s]", c, aNode)
	}
	if st.Next.Command != "getChildren "+l.Dir() {
		t.Fatalf("A's second step is %q", st.Next.Command)
	}
	st = steptest.Next(t, a, "stopped")
	if st.Done[1].Reply != "["+aNode+"]" || st.Next.Command != "delete "+l.Dir()+"/"+aNode || st.Next.Phase != step.Release {
		t.Fatalf("A's steps: %+v, next %+v", st.Done, st.Next)
	}

	b := steptest.Hold(t, g, "B", l.Acquire)
	st = steptest.Next(t, b, "stopped")
	bNode := steptest.Match(t, "B's create's reply", st.Done[0].Reply, dir+`/([0-9a-f]+-lock-\d{10})`)[1]
	st = steptest.Next(t, b, "stopped")
	if st.Done[1].Reply != "["+aNode+", "+bNode+"]" || st.Next.Command != "exists "+l.Dir()+"/"+aNode+" watch" {
		t.Fatalf("B's queue: %+v, next %+v", st.Done, st.Next)
	}
	if err := b.Next(); err != nil {
		t.Fatal(err)
	}
	if st = b.Settle(context.Background(), time.Second); st.State != "running" || len(st.Done) != 3 || st.Done[2].Reply != "true, watched" {
		t.Fatalf("B should wait on A's node, watched: %+v", st)
	}

	a.End()
	if r := steptest.Settle(t, a, "done").Result.(steptest.Held); r.Acquire != nil || r.Release != nil {
		t.Fatalf("A: %+v", r)
	}
	st = steptest.Settle(t, b, "stopped") // woken by A's delete: it reads the queue again
	if st.Done[3-1].Reply != "true, watched" || st.Next.Command != "getChildren "+l.Dir() {
		t.Fatalf("B woken: %+v, next %+v", st.Done, st.Next)
	}
	st = steptest.Next(t, b, "stopped")
	if st.Done[3].Reply != "["+bNode+"]" {
		t.Fatalf("B's queue once A is gone: %q", st.Done[3].Reply)
	}
	b.End()
	if r := steptest.Settle(t, b, "done").Result.(steptest.Held); r.Acquire != nil || r.Release != nil {
		t.Fatalf("B: %+v", r)
	}

	// Not armed: through the same gate, never stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ls, err := l.Acquire(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if c := children(t, e, l.Dir()); len(c) != 0 {
		t.Fatalf("every hold released, the lock holds %v", c)
	}
}

// A stepped sale's lease counts from the queue's read the learner let go,
// not from before the gate: stopped before that read longer than the
// session's timeout (its pings, go-zookeeper's own, keep it alive), it
// still holds a lease not lost once it finds itself first. (Counted from
// before, it was lost at once, and the sale answered lease_lost.)
func TestStepLeaseCountsFromTheRead(t *testing.T) {
	if testing.Short() {
		t.Skip("waits longer than a session's timeout")
	}
	e := zktest.Start(t, 1)
	s := session(t, e, zk.SessionOptions{Timeout: 4 * time.Second})
	l := zk.New(s, zk.Options{Key: "stepped-lease"})
	g := step.New(step.Options{})
	defer g.Close()
	a := steptest.Hold(t, g, "A", l.Acquire)
	st := steptest.Next(t, a, "stopped") // its node created; stopped before the queue's read
	steptest.Match(t, "A's next step", st.Next.Command, `getChildren .*`)
	time.Sleep(5 * time.Second) // the learner reading, longer than the 4 s session timeout: the time itself is the test
	if err := a.End(); err != nil {
		t.Fatal(err)
	}
	if r := steptest.Settle(t, a, "done").Result.(steptest.Held); r.Acquire != nil || r.Release != nil || r.LostAtGrant {
		t.Fatalf("A stopped 5 s before its queue's read with a 4 s session, then let go: %+v, want a lease not lost once held", r)
	}
}
