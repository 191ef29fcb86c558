package zk_test

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/zktest"
)

type stepHeld struct{ acquire, release error }

// stepHold starts a stepped sale that takes l and releases it; it stops
// before its first request.
func stepHold(t *testing.T, g *step.Gate, id string, l *zk.Locker) *step.Sale {
	t.Helper()
	s, err := g.Start(context.Background(), id, func(ctx context.Context) any {
		step.Phase(ctx, step.Acquire)
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		ls, err := l.Acquire(wctx, id)
		if err != nil {
			return stepHeld{acquire: err}
		}
		step.Phase(ctx, step.Release)
		return stepHeld{release: ls.Release(ctx)}
	})
	if err != nil {
		t.Fatal(err)
	}
	stepSettle(t, s, "stopped")
	return s
}

func stepSettle(t *testing.T, s *step.Sale, want string) step.State {
	t.Helper()
	st := s.Settle(context.Background(), 10*time.Second)
	if st.State != want {
		t.Fatalf("%s is %s, want %s: %+v", st.ID, st.State, want, st)
	}
	return st
}

func stepNext(t *testing.T, s *step.Sale, want string) step.State {
	t.Helper()
	if err := s.Next(); err != nil {
		t.Fatal(err)
	}
	return stepSettle(t, s, want)
}

func stepMatch(t *testing.T, what, got, pattern string) []string {
	t.Helper()
	m := regexp.MustCompile("^" + pattern + "$").FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("%s is %q, want it to match %q", what, got, pattern)
	}
	return m
}

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

	a := stepHold(t, g, "A", l)
	stepMatch(t, "A's first step", a.State().Next.Command, "create "+dir+`/[0-9a-f]+-lock- "A" ephemeral sequential`)
	if c := children(t, e, l.Dir()); len(c) != 0 {
		t.Fatalf("A stopped before its create, yet the lock holds %v", c)
	}
	st := stepNext(t, a, "stopped")
	aNode := stepMatch(t, "A's create's reply", st.Done[0].Reply, dir+`/([0-9a-f]+-lock-\d{10})`)[1]
	if c := children(t, e, l.Dir()); !slices.Equal(c, []string{aNode}) {
		t.Fatalf("A's create let go, the lock holds %v, want [%s]", c, aNode)
	}
	if st.Next.Command != "getChildren "+l.Dir() {
		t.Fatalf("A's second step is %q", st.Next.Command)
	}
	st = stepNext(t, a, "stopped")
	if st.Done[1].Reply != "["+aNode+"]" || st.Next.Command != "delete "+l.Dir()+"/"+aNode || st.Next.Phase != step.Release {
		t.Fatalf("A's steps: %+v, next %+v", st.Done, st.Next)
	}

	b := stepHold(t, g, "B", l)
	st = stepNext(t, b, "stopped")
	bNode := stepMatch(t, "B's create's reply", st.Done[0].Reply, dir+`/([0-9a-f]+-lock-\d{10})`)[1]
	st = stepNext(t, b, "stopped")
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
	if r := stepSettle(t, a, "done").Result.(stepHeld); r.acquire != nil || r.release != nil {
		t.Fatalf("A: %+v", r)
	}
	st = stepSettle(t, b, "stopped") // woken by A's delete: it reads the queue again
	if st.Done[3-1].Reply != "true, watched" || st.Next.Command != "getChildren "+l.Dir() {
		t.Fatalf("B woken: %+v, next %+v", st.Done, st.Next)
	}
	st = stepNext(t, b, "stopped")
	if st.Done[3].Reply != "["+bNode+"]" {
		t.Fatalf("B's queue once A is gone: %q", st.Done[3].Reply)
	}
	b.End()
	if r := stepSettle(t, b, "done").Result.(stepHeld); r.acquire != nil || r.release != nil {
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
	a, err := g.Start(context.Background(), "A", func(ctx context.Context) any {
		step.Phase(ctx, step.Acquire)
		ls, err := l.Acquire(ctx, "A")
		if err != nil {
			return err
		}
		lost := lease.IsLost(ls) // by the clock too: the timer may not have run yet
		step.Phase(ctx, step.Release)
		if err := ls.Release(ctx); err != nil {
			return err
		}
		return lost
	})
	if err != nil {
		t.Fatal(err)
	}
	stepSettle(t, a, "stopped")
	st := stepNext(t, a, "stopped") // its node created; stopped before the queue's read
	stepMatch(t, "A's next step", st.Next.Command, `getChildren .*`)
	time.Sleep(5 * time.Second) // the learner reading, longer than the 4 s session timeout: the time itself is the test
	if err := a.End(); err != nil {
		t.Fatal(err)
	}
	if r := stepSettle(t, a, "done").Result; r != false {
		t.Fatalf("A stopped 5 s before its queue's read with a 4 s session, then let go: %v, want a lease not lost once held", r)
	}
}
