package step_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// bench is a stock on a real Redis whose client has the gate, and the
// versions built twice: two replicas (v2's mutex is one per process).
type bench struct {
	rdb      *redis.Client
	svc      *sale.Service
	one, two map[string]sale.Method
	lockKey  string
}

func newBench(t *testing.T, ttl time.Duration) *bench {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	rdb.AddHook(step.Hook{})
	b := &bench{rdb: rdb, svc: sale.New(rdb, sale.Options{Key: "inventory:" + t.Name()}), lockKey: "lock:" + t.Name()}
	d := builder.Deps{Redis: rdb, LockKey: b.lockKey, TTL: ttl}
	b.one, b.two = builder.Build(d, versions.Variant{Wait: "poll"}), builder.Build(d, versions.Variant{Wait: "poll"})
	if err := b.svc.SetStock(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	return b
}

// outcome is what a stepped sale's run returns.
type outcome struct {
	res sale.Result
	err error
}

func (b *bench) start(t *testing.T, g *step.Gate, id string, m sale.Method) *step.Sale {
	t.Helper()
	s, err := g.Start(context.Background(), id, func(ctx context.Context) any {
		res, err := b.svc.Sell(ctx, m)
		return outcome{res, err}
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Settle(context.Background(), 5*time.Second); st.State != "stopped" {
		t.Fatalf("%s did not stop at its first step: %+v", id, st)
	}
	return s
}

// next lets s take one step and waits until it stops again (or ends).
func next(t *testing.T, s *step.Sale) step.State {
	t.Helper()
	if err := s.Next(); err != nil {
		t.Fatal(err)
	}
	st := s.Settle(context.Background(), 10*time.Second)
	if st.State == "running" {
		t.Fatalf("%s neither stopped again nor ended within 10 s: %+v", st.ID, st)
	}
	return st
}

// until steps s until the step it stops before starts with prefix.
func until(t *testing.T, s *step.Sale, prefix string) step.State {
	t.Helper()
	st := s.State()
	for st.Next == nil || !strings.HasPrefix(st.Next.Command, prefix) {
		if st.State != "stopped" || len(st.Done) > 50 {
			t.Fatalf("%s never stopped before %q: %+v", st.ID, prefix, st)
		}
		st = next(t, s)
	}
	return st
}

// finish lets s run to its end and returns its outcome.
func finish(t *testing.T, s *step.Sale) (step.State, outcome) {
	t.Helper()
	s.End()
	st := s.Settle(context.Background(), 10*time.Second)
	if st.State != "done" {
		t.Fatalf("%s did not end within 10 s: %+v", st.ID, st)
	}
	return st, st.Result.(outcome)
}

// waitDone waits until s has ended, reading its state directly (not
// through Gate.Get, which counts as a look at it).
func waitDone(t *testing.T, s *step.Sale) step.State {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if st := s.State(); st.State == "done" || time.Now().After(deadline) {
			return st
		}
		time.Sleep(10 * time.Millisecond) // polling the observable state
	}
}

// find returns the done steps whose command starts with prefix.
func find(st step.State, prefix string) []step.Step {
	var found []step.Step
	for _, d := range st.Done {
		if strings.HasPrefix(d.Command, prefix) {
			found = append(found, d)
		}
	}
	return found
}

func (b *bench) stock(t *testing.T) string {
	t.Helper()
	v, err := b.rdb.Get(context.Background(), b.svc.Key()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitGone waits until key no longer exists (a lease run out).
func (b *bench) waitGone(t *testing.T, key string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		n, err := b.rdb.Exists(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after 10 s", key)
		}
		time.Sleep(10 * time.Millisecond) // polling the observable state
	}
}

// TestBothReadTheSameStock: without a lock across replicas (none, v2), A and
// B both GET 10 and both SET 9: one unit sold twice.
func TestBothReadTheSameStock(t *testing.T) {
	for _, name := range []string{"none", "v2"} {
		t.Run(name, func(t *testing.T) {
			b := newBench(t, time.Minute)
			g := step.New(step.Options{})
			defer g.Close()
			a := b.start(t, g, "A", b.one[name])
			if st := a.State(); st.Next.Command != "GET "+b.svc.Key() {
				t.Fatalf("A's first step is %q, want the stock's GET", st.Next.Command)
			}
			next(t, a) // A: GET -> "10"
			bb := b.start(t, g, "B", b.two[name])
			next(t, bb) // B: GET -> "10"
			sa, oa := finish(t, a)
			sb, ob := finish(t, bb)
			for _, st := range []step.State{sa, sb} {
				gets := find(st, "GET "+b.svc.Key())
				if len(gets) != 1 || gets[0].Reply != `"10"` {
					t.Fatalf("%s's GET: %+v, want one answered \"10\"", st.ID, gets)
				}
				sets := find(st, "SET "+b.svc.Key()+" 9")
				if len(sets) != 1 || sets[0].Reply != "OK" {
					t.Fatalf("%s's SET: %+v, want one SET ... 9 -> OK", st.ID, st.Done)
				}
			}
			if oa.err != nil || ob.err != nil || oa.res.Remaining != 9 || ob.res.Remaining != 9 {
				t.Fatalf("A: %+v %v, B: %+v %v: want both sold, 9 left each", oa.res, oa.err, ob.res, ob.err)
			}
			if got := b.stock(t); got != "9" {
				t.Fatalf("stock %s after two sales, want 9: one unit sold twice", got)
			}
		})
	}
}

// TestDelDeletesSuccessorsLock: v4's A works past its lease, B takes the
// lock, and A's DEL deletes B's key while B still works.
func TestDelDeletesSuccessorsLock(t *testing.T) {
	b := newBench(t, 300*time.Millisecond)
	g := step.New(step.Options{})
	defer g.Close()
	a := b.start(t, g, "A", b.one["v4"])
	st := a.State()
	if !strings.HasPrefix(st.Next.Command, "SET "+b.lockKey+" ") || !strings.Contains(st.Next.Command, " nx") || st.Next.Phase != step.Acquire {
		t.Fatalf("A's first step is %+v, want the lock's SET ... NX in the acquire phase", st.Next)
	}
	st = next(t, a)
	if st.Done[0].Reply != "OK" {
		t.Fatalf("A's SET NX answered %q, want OK", st.Done[0].Reply)
	}
	aOwner, _ := b.rdb.Get(context.Background(), b.lockKey).Result()
	until(t, a, "business work")
	b.waitGone(t, b.lockKey) // A's lease runs out while it works
	bb := b.start(t, g, "B", b.two["v4"])
	until(t, bb, "GET "+b.svc.Key()) // B holds the lock
	bOwner, err := b.rdb.Get(context.Background(), b.lockKey).Result()
	if err != nil || bOwner == aOwner || !strings.Contains(bb.State().Done[0].Command, bOwner) {
		t.Fatalf("the lock's owner is %q (%v), A's was %q: want B's", bOwner, err, aOwner)
	}
	sa, _ := finish(t, a)
	dels := find(sa, "DEL "+b.lockKey)
	if len(dels) != 1 || dels[0].Reply != "1" || dels[0].Phase != step.Release {
		t.Fatalf("A's release: %+v, want one DEL that deleted a key", dels)
	}
	if n, _ := b.rdb.Exists(context.Background(), b.lockKey).Result(); n != 0 {
		t.Fatal("the lock key still exists after A's DEL: want B's lock deleted")
	}
	if st := bb.State(); st.State != "stopped" {
		t.Fatalf("B is %s, want still stopped in its sale while its lock is gone", st.State)
	}
	finish(t, bb)
}

// TestReleaseScriptReturnsZero: v6's A works past its lease, B takes the
// lock, and A's compare-and-delete script finds it B's: it returns 0.
func TestReleaseScriptReturnsZero(t *testing.T) {
	b := newBench(t, 300*time.Millisecond)
	g := step.New(step.Options{})
	defer g.Close()
	a := b.start(t, g, "A", b.one["v6"])
	until(t, a, "business work")
	b.waitGone(t, b.lockKey)
	bb := b.start(t, g, "B", b.two["v6"])
	until(t, bb, "GET "+b.svc.Key())
	sa, oa := finish(t, a)
	for _, d := range sa.Done {
		t.Logf("A %d %-7s %s -> %s", d.N, d.Phase, d.Command, d.Reply)
	}
	var release []step.Step
	for _, d := range sa.Done {
		if d.Phase == step.Release {
			release = append(release, d)
		}
	}
	if len(release) == 0 || release[len(release)-1].Reply != "0" || !strings.HasPrefix(release[len(release)-1].Command, "EVAL") {
		t.Fatalf("A's release steps: %+v, want its script's last reply 0", release)
	}
	if oa.res.ReleaseErr == nil {
		t.Fatal("A's sale reports no release error: want the lock not held")
	}
	if owner, _ := b.rdb.Get(context.Background(), b.lockKey).Result(); !strings.Contains(bb.State().Done[0].Command, owner) || owner == "" {
		t.Fatalf("the lock's owner after A's release is %q: want B's, kept", owner)
	}
	finish(t, bb)
}

// TestReleasedWhenLeft: a sale stopped holding the lock is cancelled when
// abandoned, past the bound, or on Cancel; it releases its lock, writes
// nothing, and the next sale is served at once.
func TestReleasedWhenLeft(t *testing.T) {
	cases := map[string]struct {
		opts   step.Options
		cancel bool
		why    string
	}{
		"abandoned": {step.Options{Idle: 200 * time.Millisecond}, false, "abandoned"},
		"bound":     {step.Options{Bound: 300 * time.Millisecond}, false, "bound"},
		"cancelled": {step.Options{}, true, "reset"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b := newBench(t, time.Minute) // far beyond the test: only the release frees the lock
			g := step.New(c.opts)
			defer g.Close()
			a := b.start(t, g, "A", b.one["v6"])
			until(t, a, "SET "+b.svc.Key()) // stopped before its write, holding the lock
			if c.cancel {
				a.Cancel("reset")
			}
			st := waitDone(t, a)
			if st.State != "done" || !strings.Contains(st.Cancelled, c.why) {
				t.Fatalf("A: %s, cancelled %q: want done, cancelled (%s)", st.State, st.Cancelled, c.why)
			}
			if o := st.Result.(outcome); !errors.Is(o.err, step.ErrCancelled) {
				t.Fatalf("A's sale: %v, want ErrCancelled", o.err)
			}
			if n, _ := b.rdb.Exists(context.Background(), b.lockKey).Result(); n != 0 {
				t.Fatal("the lock key is left behind")
			}
			if got := b.stock(t); got != "10" {
				t.Fatalf("stock %s, want 10: a cancelled sale writes nothing", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if res, err := b.svc.Sell(ctx, b.two["v6"]); err != nil || res.Remaining != 9 {
				t.Fatalf("the next sale: %+v %v, want sold at once", res, err)
			}
		})
	}
}

// TestUnarmedNeverStops: a sale through the gated client, not armed, runs
// through while an armed one is stopped.
func TestUnarmedNeverStops(t *testing.T) {
	b := newBench(t, time.Minute)
	g := step.New(step.Options{})
	defer g.Close()
	a := b.start(t, g, "A", b.one["none"])
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if res, err := b.svc.Sell(ctx, b.two["v6"]); err != nil || res.Remaining != 9 {
		t.Fatalf("unarmed sale: %+v %v, want sold", res, err)
	}
	if st := a.State(); st.State != "stopped" || len(st.Done) != 0 {
		t.Fatalf("the armed sale: %+v, want still stopped before its first step", st)
	}
}

// TestWatchdogShownNotStopped: v8's watchdog renews in its own goroutine
// while its holder is stopped: its renewals are shown as background steps,
// never stopped, so the lock outlives its lease as v8 promises.
func TestWatchdogShownNotStopped(t *testing.T) {
	b := newBench(t, 300*time.Millisecond)
	g := step.New(step.Options{})
	defer g.Close()
	a := b.start(t, g, "A", b.one["v8"])
	until(t, a, "business work")
	for deadline := time.Now().Add(10 * time.Second); ; {
		renewals := 0
		for _, d := range a.State().Done {
			if d.Phase == step.Background && strings.HasPrefix(d.Reply, "1") {
				renewals++
			}
		}
		if renewals >= 3 { // past three lease thirds: a full lease renewed
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals shown within 10 s: %+v", renewals, a.State().Done)
		}
		time.Sleep(10 * time.Millisecond) // polling the observable state
	}
	if n, _ := b.rdb.Exists(context.Background(), b.lockKey).Result(); n != 1 {
		t.Fatal("A's lock expired while its watchdog renewed it")
	}
	if _, o := finish(t, a); o.err != nil || o.res.ReleaseErr != nil {
		t.Fatalf("A: %+v %v, want sold and released", o.res, o.err)
	}
}

// Timeout leaves an unstepped sale's bound as it is, and gives a stepped
// sale's the time to its own bound on top: a release stopped at the gate
// for a whole lease (v5's story) must still be able to finish.
func TestTimeoutCountsFromTheBound(t *testing.T) {
	if got := step.Timeout(context.Background(), 5*time.Second); got != 5*time.Second {
		t.Fatalf("unstepped: %s, want 5s", got)
	}
	g := step.New(step.Options{Bound: time.Minute})
	defer g.Close()
	got := make(chan time.Duration, 1)
	if _, err := g.Start(context.Background(), "T", func(ctx context.Context) any {
		got <- step.Timeout(ctx, 5*time.Second)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if d := <-got; d <= 55*time.Second || d > 65*time.Second {
		t.Fatalf("stepped, bound 1m: %s, want about 1m5s", d)
	}
}

// Past its bound a stepped sale's step still has d (never less), and a
// stepped sale's cancellation is told to whoever waits on it, also through
// a context detached from the sale's (a holder's); an unstepped sale's
// never is.
func TestTimeoutPastTheBoundAndCancelled(t *testing.T) {
	g := step.New(step.Options{Bound: time.Millisecond})
	defer g.Close()
	got := make(chan time.Duration, 1)
	told := make(chan struct{})
	s, err := g.Start(context.Background(), "T", func(ctx context.Context) any {
		<-ctx.Done() // cancelled at its 1 ms bound
		got <- step.Timeout(ctx, 5*time.Second)
		step.Cancelled(context.WithoutCancel(ctx), func() { close(told) })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := <-got; d != 5*time.Second {
		t.Fatalf("past the bound: %s, want 5s", d)
	}
	select {
	case <-told:
	case <-time.After(10 * time.Second):
		t.Fatalf("the sale's cancellation (%+v) was not told", s.State())
	}
	stop := step.Cancelled(context.Background(), func() { t.Error("an unstepped sale told of a cancellation") })
	if stop() {
		t.Error("stop of an unstepped sale's Cancelled says it stopped something")
	}
}

// TestNestedWaitsOnItselfItsRunningTime: v6's nested acquisition (the
// tutorial's v7 /sale takes the lock twice) finds the key held by its own
// sale and waits on itself until its bound, the gate's Wait: counted in
// the sale's running time, so the time it stood stopped at the gate (the
// learner's) leaves it the whole bound once let go. It gives up with
// sale.ErrLockTimeout, sells nothing, and releases its lock.
func TestNestedWaitsOnItselfItsRunningTime(t *testing.T) {
	b := newBench(t, 10*time.Second)
	const bound = 300 * time.Millisecond
	g := step.New(step.Options{Wait: bound})
	defer g.Close()
	m := b.one["v6"]
	m.Nested = true
	a := b.start(t, g, "A", m)
	if st := next(t, a); st.Done[0].Reply != "OK" {
		t.Fatalf("A's SET NX answered %q, want OK", st.Done[0].Reply)
	}
	if st := next(t, a); st.Done[1].Reply != "(nil)" || st.Phase != step.Acquire {
		t.Fatalf("A's nested SET NX answered %q, want nil: the key is A's own", st.Done[1].Reply)
	}
	time.Sleep(2 * bound) // stopped at the gate: the learner's time, not the wait's
	resumed := time.Now()
	st, out := finish(t, a)
	if !errors.Is(out.err, sale.ErrLockTimeout) {
		t.Fatalf("A's nested acquisition ended with %v, want sale.ErrLockTimeout", out.err)
	}
	var after []step.Step
	for _, d := range st.Done {
		if d.Phase == step.Acquire && d.Start.After(resumed) {
			after = append(after, d)
		}
	}
	var asked time.Duration
	if len(after) > 0 {
		asked = after[len(after)-1].End.Sub(resumed)
	}
	if len(after) < 2 || asked < bound*8/10 {
		t.Fatalf("once let go A asked %d times, the last %s after: want it to ask for about its bound (%s), the time stopped not counted", len(after), asked, bound)
	}
	if n := b.rdb.Exists(context.Background(), b.lockKey).Val(); n != 0 || b.stock(t) != "10" {
		t.Fatalf("after A gave up: the lock key there %d times, stock %s: want released, 10", n, b.stock(t))
	}
}

// waitHeld waits until the paused sale s holds a background command (v8's
// watchdog's renewal, held at the gate instead of sent).
func waitHeld(t *testing.T, s *step.Sale) step.State {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		st := s.State()
		if len(st.Held) > 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds no background command within 10 s: %+v", st.ID, st)
		}
		time.Sleep(10 * time.Millisecond) // polling the observable state
	}
}

// TestPausedHolder: v8's A, paused before its write, holds its watchdog's
// renewals at the gate: its lease runs out for real, B takes the lock and
// reads 10, and A, resumed, writes 9 after B read: one unit sold twice.
// Fenced, A's write is refused instead.
func TestPausedHolder(t *testing.T) {
	for _, fence := range []bool{false, true} {
		t.Run(map[bool]string{false: "flaw", true: "fenced"}[fence], func(t *testing.T) {
			b := newBench(t, 600*time.Millisecond)
			if fence {
				d := builder.Deps{Redis: b.rdb, LockKey: b.lockKey, TTL: 600 * time.Millisecond}
				b.one = builder.Build(d, versions.Variant{Wait: "poll", Fence: true})
				b.two = builder.Build(d, versions.Variant{Wait: "poll", Fence: true})
			}
			g := step.New(step.Options{})
			defer g.Close()
			a := b.start(t, g, "A", b.one["v8"])
			if err := a.Pause(); !errors.Is(err, step.ErrNoPause) {
				t.Fatalf("pause without Pausable: %v, want ErrNoPause", err)
			}
			a.Pausable()
			write := "SET " + b.svc.Key()
			if fence {
				write = "EVALSHA"
			}
			st := until(t, a, "business work")
			next(t, a) // the work done: A stopped before its write, its lease checked
			if st = a.State(); !strings.HasPrefix(st.Next.Command, write) {
				t.Fatalf("A stopped before %q, want its write", st.Next.Command)
			}
			if err := a.Pause(); err != nil {
				t.Fatal(err)
			}
			if err := a.Pause(); !errors.Is(err, step.ErrPaused) {
				t.Fatalf("second pause: %v, want ErrPaused", err)
			}
			if err := a.Next(); !errors.Is(err, step.ErrPaused) {
				t.Fatalf("Next while paused: %v, want ErrPaused", err)
			}
			if err := a.End(); !errors.Is(err, step.ErrPaused) {
				t.Fatalf("End while paused: %v, want ErrPaused", err)
			}
			held := waitHeld(t, a).Held[0]
			if !strings.HasPrefix(held.Command, "EVALSHA") || held.Phase != step.Background {
				t.Fatalf("held: %+v, want the watchdog's renewal script", held)
			}
			renewals := len(find(a.State(), "EVALSHA"))
			b.waitGone(t, b.lockKey) // the paused watchdog renewed nothing
			if got := len(find(a.State(), "EVALSHA")); got != renewals {
				t.Fatalf("%d EVALSHA steps sent while paused", got-renewals)
			}
			bb := b.start(t, g, "B", b.two["v8"])
			stB := until(t, bb, "check: stock") // B took the lock and read the stock
			if !strings.HasPrefix(stB.Next.Command, "check: stock 10 ") {
				t.Fatalf("B: %+v, want it to have read 10", stB)
			}
			if err := a.Resume(); err != nil {
				t.Fatal(err)
			}
			st = a.Unheld(context.Background(), 5*time.Second)
			last := st.Done[len(st.Done)-1]
			if len(st.Held) != 0 || last.Phase != step.Background || last.Reply != "0" {
				t.Fatalf("after the resume: held %+v, last step %+v: want the held renewal sent, answered 0 (B's lock)", st.Held, last)
			}
			sa, oa := finish(t, a)
			sb, ob := finish(t, bb)
			for _, d := range append(sa.Done, sb.Done...) {
				t.Logf("%d %-10s %s -> %s", d.N, d.Phase, d.Command, d.Reply)
			}
			if !fence {
				if oa.err != nil || ob.err != nil || oa.res.Remaining != 9 || ob.res.Remaining != 9 || b.stock(t) != "9" {
					t.Fatalf("A: %+v %v, B: %+v %v, stock %s: want both sold, 9 left: one unit sold twice", oa.res, oa.err, ob.res, ob.err, b.stock(t))
				}
				return
			}
			if !errors.Is(oa.err, sale.ErrFenced) || ob.err != nil || ob.res.Remaining != 9 || b.stock(t) != "9" {
				t.Fatalf("A: %+v %v, B: %+v %v, stock %s: want A's write refused, B sold", oa.res, oa.err, ob.res, ob.err, b.stock(t))
			}
		})
	}
}

// TestPausedReleasedWhenLeft: a paused v8 sale, its watchdog's renewal held,
// is cancelled when abandoned, past the bound, or on Cancel like any
// stepped sale: it wakes, releases its lock, writes nothing, and the next
// sale is served at once.
func TestPausedReleasedWhenLeft(t *testing.T) {
	const ttl = 3 * time.Second // renewed every 1 s; outlives the cases' bounds
	cases := map[string]struct {
		opts   step.Options
		cancel bool
		why    string
	}{
		"abandoned": {step.Options{Idle: 1500 * time.Millisecond}, false, "abandoned"},
		"bound":     {step.Options{Bound: 1500 * time.Millisecond}, false, "bound"},
		"cancelled": {step.Options{}, true, "reset"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b := newBench(t, ttl)
			g := step.New(c.opts)
			defer g.Close()
			a := b.start(t, g, "A", b.one["v8"])
			a.Pausable()
			until(t, a, "SET "+b.svc.Key()) // stopped before its write, holding the lock
			if err := a.Pause(); err != nil {
				t.Fatal(err)
			}
			waitHeld(t, a)
			if c.cancel {
				a.Cancel("reset")
			}
			st := waitDone(t, a)
			if st.State != "done" || !strings.Contains(st.Cancelled, c.why) || st.Paused {
				t.Fatalf("A: %s, cancelled %q, paused %v: want done, cancelled (%s)", st.State, st.Cancelled, st.Paused, c.why)
			}
			if o := st.Result.(outcome); !errors.Is(o.err, step.ErrCancelled) {
				t.Fatalf("A's sale: %v, want ErrCancelled", o.err)
			}
			rel := st.Done[len(st.Done)-1]
			if rel.Phase != step.Release || rel.Reply != "1" {
				t.Fatalf("A's last step: %+v, want its release, deleting its lock (1)", rel)
			}
			if n, _ := b.rdb.Exists(context.Background(), b.lockKey).Result(); n != 0 {
				t.Fatal("the lock key is left behind")
			}
			if got := b.stock(t); got != "10" {
				t.Fatalf("stock %s, want 10: a cancelled sale writes nothing", got)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if res, err := b.svc.Sell(ctx, b.two["v8"]); err != nil || res.Remaining != 9 {
				t.Fatalf("the next sale: %+v %v, want sold at once", res, err)
			}
		})
	}
}

// TestLeaseCountsFromTheLetGo: v8's B, stopped before its acquire for
// longer than a lease (as in the paused-holder story, while A's lease runs
// out), is granted a whole lease once let go: its validity counts from the
// command's sending (step.Sent), not from its arrival at the gate, and it
// sells instead of believing its fresh lease lost.
func TestLeaseCountsFromTheLetGo(t *testing.T) {
	const ttl = 300 * time.Millisecond
	b := newBench(t, ttl)
	g := step.New(step.Options{})
	defer g.Close()
	bb := b.start(t, g, "B", b.one["v8"])
	time.Sleep(2 * ttl) // the learner's time at the gate, longer than a lease: what this checks
	if _, o := finish(t, bb); o.err != nil || o.res.Remaining != 9 {
		t.Fatalf("B: %+v %v, want sold: its lease counted from its acquire's sending", o.res, o.err)
	}
}
