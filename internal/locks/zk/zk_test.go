package zk_test

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/zktest"
)

// session dials the ensemble, closed when the test ends.
func session(t *testing.T, e *zktest.Ensemble, opts zk.SessionOptions) *zk.Session {
	t.Helper()
	s, err := zk.Dial(e.Servers(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// children are the lock's waiters' nodes as a separate client sees them.
func children(t *testing.T, e *zktest.Ensemble, dir string) []string {
	t.Helper()
	conn, _, err := gozk.Connect(e.Servers(), 10*time.Second, gozk.WithLogInfo(false), gozk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c, _, err := conn.Children(dir)
	if err != nil && !errors.Is(err, gozk.ErrNoNode) {
		t.Fatal(err)
	}
	return c
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// Two sessions, each its own Locker (two replicas), never hold the lock at
// once and lose no update; a third attempt while one holds is refused at
// once; not reentrant; fenced, every holder's token is larger.
func TestZKExcludesAcrossSessions(t *testing.T) {
	e := zktest.Start(t, 3)
	rdb := redistest.Start(t).Client()
	a := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "lock"})
	b := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "lock"})
	locktest.Exclusion(t, rdb, a, b)
	locktest.OneAttempt(t, a)
	held, err := a.Acquire(context.Background(), "owner")
	if err != nil {
		t.Fatal(err)
	}
	locktest.Waits(t, a, "owner")
	if err := held.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	locktest.Tokens(t, zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "fenced", Fence: true}))
	if left := children(t, e, a.Dir()); len(left) != 0 {
		t.Fatalf("nodes left after every release: %v", left)
	}
}

// The token is the holder's node's creation zxid, and a later holder's
// (another session's) is larger.
func TestZKTokenIsTheCreationZxid(t *testing.T) {
	e := zktest.Start(t, 1)
	ctx := context.Background()
	a := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "lock", Fence: true})
	held, err := a.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := gozk.Connect(e.Servers(), 10*time.Second, gozk.WithLogInfo(false), gozk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	nodes, _, err := conn.Children(a.Dir())
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes %v (err %v), want the holder's", nodes, err)
	}
	_, stat, err := conn.Get(a.Dir() + "/" + nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	if held.Token() != stat.Czxid || held.Token() == 0 {
		t.Fatalf("token %d, the holder's node was created at zxid %d", held.Token(), stat.Czxid)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "lock", Fence: true})
	next, err := b.Acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer next.Release(ctx)
	if next.Token() <= held.Token() {
		t.Fatalf("the next holder's token %d is not larger than %d", next.Token(), held.Token())
	}
}

// A waiter that gives up (its deadline) deletes its node: the queue is the
// holder's alone, and the lock goes to the next taker the moment the holder
// releases. (The seed's Lock has no deadline; its error paths leave the
// node, and on a replica's long-lived session it would block every later
// waiter for as long as the replica runs.)
func TestZKWaiterThatGivesUpLeavesNoNode(t *testing.T) {
	e := zktest.Start(t, 1)
	ctx := context.Background()
	s := session(t, e, zk.SessionOptions{Timeout: 10 * time.Second})
	a, b := zk.New(s, zk.Options{Key: "lock"}), zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "lock"})
	held, err := a.Acquire(ctx, "holder")
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		_, err := b.Acquire(wctx, "waiter")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("waiter: %v, want its deadline", err)
		}
	}
	locktest.WaitFor(t, 5*time.Second, "only the holder's node left", func() bool { return len(children(t, e, a.Dir())) == 1 })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := b.TryAcquire(ctx, "next")
	if err != nil {
		t.Fatalf("after the release, with the waiters gone: %v", err)
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The lock's directory is made when missing, also after someone deleted it.
func TestZKMakesTheDirectory(t *testing.T) {
	e := zktest.Start(t, 1)
	ctx := context.Background()
	l := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "a:b"})
	held, err := l.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got := children(t, e, "/locklab"); !slices.Equal(got, []string{"a:b"}) {
		t.Fatalf("/locklab has %v", got)
	}
}

// cutter makes the client's connections and cuts them on demand: a
// partition between the session's holder and every member (the members see
// nothing more from it, as from a crashed or paused process).
type cutter struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cutter) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("cut off")
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutter) set(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	if cut {
		for _, conn := range c.conns {
			conn.Close()
		}
		c.conns = nil
	}
}

// The holder's session expires while it holds (cut off from every member
// past its timeout): its node is deleted and another session takes the
// lock, but the holder's Lost has closed before that, whichever comes
// first on the members; after the partition heals its release is refused
// (not held), and the client goes on in a new session.
func TestZKSessionExpiresWhileHeld(t *testing.T) {
	e := zktest.Start(t, 3)
	ctx := context.Background()
	cut := &cutter{}
	timeout := 2 * time.Second
	a := zk.New(session(t, e, zk.SessionOptions{Timeout: timeout, Dialer: cut.dial}), zk.Options{Key: "lock", Fence: true})
	b := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "lock", Fence: true})
	held, err := a.Acquire(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	cut.set(true)
	cutAt := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	next, err := b.Acquire(wctx, "b")
	if err != nil {
		t.Fatalf("the next holder after the session's expiry: %v", err)
	}
	took := time.Since(cutAt)
	if !lease.IsLost(held) {
		t.Fatalf("another session holds the lock (%s after the cut) while the cut-off holder's lease is not lost", took)
	}
	select {
	case <-held.Lost():
	default:
		t.Fatal("Lost not closed")
	}
	if took < timeout {
		t.Fatalf("the next holder got the lock %s after the cut, before the session's timeout %s", took, timeout)
	}
	if next.Token() <= held.Token() {
		t.Fatalf("next token %d not larger than the expired holder's %d", next.Token(), held.Token())
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// The partition heals and a sale comes in at once, before the client
	// knows its session expired: the attempt is not failed for that (no
	// outage), it queues again in the client's new session.
	cut.set(false)
	again, err := a.Acquire(wctx, "a")
	if err != nil {
		t.Fatalf("the client's first acquisition after its session expired: %v", err)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := held.Release(ctx); !errors.Is(err, lease.ErrNotHeld) {
		t.Fatalf("the expired holder's release: %v, want not held", err)
	}
}

// With one member of three down the lock still works; with two down there
// is no quorum: an acquisition fails by its deadline or with an error, and
// leaves nothing held; with the members back, the lock works.
func TestZKMembersDown(t *testing.T) {
	e := zktest.Start(t, 3)
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	a := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "lock"})
	b := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "lock"})
	e.Members[0].Stop()
	locktest.Exclusion(t, rdb, a, b)

	e.Members[1].Stop()
	actx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	if l, err := a.Acquire(actx, "owner"); err == nil {
		_ = l.Release(ctx)
		t.Fatal("obtained the lock with two of three members down")
	}
	if waited := time.Since(start); waited > 4*time.Second {
		t.Fatalf("gave up after %s on a 2 s deadline", waited)
	}
	for _, m := range e.Members[:2] {
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range e.Members {
		if err := m.WaitServing(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	held, err := b.Acquire(bctx, "owner")
	if err != nil {
		t.Fatalf("with the members back: %v", err)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// A waiter is woken by the watch on the node before its own; a waiter whose
// request switched its wake-up off (make mutations' lost-wakeup) has that
// watch's event dropped, and waits out its deadline with the lock free.
func TestZKWakeUp(t *testing.T) {
	e := zktest.Start(t, 3)
	holder := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "lock"})
	waiter := zk.New(session(t, e, zk.SessionOptions{Timeout: 10 * time.Second}), zk.Options{Key: "lock"})
	locktest.WakeUp(t, holder, waiter, func() func() bool {
		before := watches(t, e) // the holder sets none
		return func() bool { return watches(t, e) > before }
	})
}

// watches is how many watches the ensemble's members hold (mntr's
// zk_watch_count, summed): a waiter's on the node before its own.
func watches(t *testing.T, e *zktest.Ensemble) int {
	t.Helper()
	n := 0
	for _, addr := range e.Servers() {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write([]byte("mntr")); err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(conn)
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(line, "zk_watch_count\t"); ok {
				c, err := strconv.Atoi(strings.TrimSpace(v))
				if err != nil {
					t.Fatal(err)
				}
				n, found = n+c, true
			}
		}
		if !found {
			t.Fatalf("%s's mntr has no zk_watch_count: %q", addr, out)
		}
	}
	return n
}
