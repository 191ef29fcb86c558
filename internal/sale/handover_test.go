package sale_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/builder"
	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/checker"
	"github.com/locklab/locklab/internal/history"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/locklab/locklab/internal/sale"
	"github.com/locklab/locklab/internal/versions"
	"github.com/redis/go-redis/v9"
)

// handoverClaim is these tests' claim deadline: short, so that a grant taken
// back passes on quickly.
const handoverClaim = 150 * time.Millisecond

// rides is a go-redis hook that sees each pipeline carrying a hand-off's
// claim and the sale's read of the stock (lease.Rider): it counts them, and
// before the first one is sent runs hold, the test's chosen moment. It
// counts too the pipelines carrying a sale's write ahead of its release
// (redisconn.Ahead: a SET, or fenced an EVAL, then the hand-over script).
type rides struct {
	n      atomic.Int32
	writes atomic.Int32
	once   sync.Once
	hold   func()
}

func (*rides) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*rides) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (r *rides) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 2 && (cmds[0].Name() == "set" || cmds[0].Name() == "eval") && cmds[1].Name() == "evalsha" {
			r.writes.Add(1)
		}
		if len(cmds) == 2 && cmds[0].Name() == "evalsha" && (cmds[1].Name() == "get" || cmds[1].Name() == "evalsha") {
			r.n.Add(1)
			if r.hold != nil {
				r.once.Do(r.hold)
			}
		}
		return next(ctx, cmds)
	}
}

// replica is one replica's sale path: its own client (with hooks), its own
// subscription, v6 handed off, fenced or not.
type replica struct {
	name string
	svc  *sale.Service
	m    sale.Method
}

func newReplica(t *testing.T, srv *redistest.Server, name string, fenced bool, hooks ...redis.Hook) replica {
	rdb := srv.Client()
	for _, h := range hooks {
		rdb.AddHook(h)
	}
	n := retry.NewNotifier(context.Background(), rdb, api.DefaultLockKey, time.Minute, handoverClaim, slog.New(slog.DiscardHandler))
	t.Cleanup(n.Close)
	deps := builder.Deps{Redis: rdb, Redlock: []redis.UniversalClient{rdb}, Notifier: n, Claim: handoverClaim}
	m := builder.Build(deps, versions.Variant{Wait: "handoff", Fence: fenced})["v6"]
	return replica{name: name, svc: sale.New(rdb, sale.Options{Key: key, AcquireTimeout: 10 * time.Second}), m: m}
}

// ledger keeps each sale as the replicas' history and the clients' ops, for
// the checker.
type ledger struct {
	mu    sync.Mutex
	ops   []checker.Op
	sales []history.Sale
}

func (lg *ledger) sell(ctx context.Context, r replica, id string) (sale.Result, error) {
	start := time.Now()
	res, err := r.svc.Sell(ctx, r.m)
	end := time.Now()
	op := checker.Op{ID: id, Invoke: start, Return: end, Outcome: api.Sold, Remaining: res.Remaining, Replica: r.name}
	s := history.Sale{ID: id, Replica: r.name, Lock: "v6", Wait: "handoff", Start: start, End: end, Status: 200, Trace: res.Trace}
	if err != nil {
		op.Outcome, s.Status, s.Code = api.Failed, 500, "error"
	}
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.ops, lg.sales = append(lg.ops, op), append(lg.sales, s)
	return res, err
}

// check asserts the checker's verdict on the sales: one holder at a time, no
// lost update, linearizable.
func (lg *ledger) check(t *testing.T, before, after int64) {
	t.Helper()
	v := checker.Check(checker.Run{StockBefore: before, StockAfter: after, Ops: lg.ops, Sales: lg.sales})
	if v.TwoHolders != 0 || v.LostUpdates != 0 || v.Linearizability != checker.OK || v.Holds != len(lg.sales) {
		t.Fatalf("checker: %d two holders %v, %d lost updates %v, linearizability %s (%s), %d holds of %d sales",
			v.TwoHolders, v.Overlaps, v.LostUpdates, v.Lost, v.Linearizability, v.NotLinearizable, v.Holds, len(lg.sales))
	}
}

// TestClaimCarriesTheRead: a sale handed the lock claims it and reads the
// stock in one round trip (one pipeline, the claim first), and uses that
// read; its write leaves with its release (one pipeline, the write first); 20 sales through two replicas sell exactly, one holder at a time,
// fenced or not.
func TestClaimCarriesTheRead(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(fmt.Sprint("fenced=", fenced), func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client()
			setStock(t, rdb, 100)
			hooks := [2]*rides{{}, {}}
			reps := [2]replica{newReplica(t, srv, "a", fenced, hooks[0]), newReplica(t, srv, "b", fenced, hooks[1])}
			var lg ledger
			var wg sync.WaitGroup
			for i := range 20 {
				wg.Go(func() {
					if _, err := lg.sell(context.Background(), reps[i%2], fmt.Sprint("s", i)); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if got := stock(t, rdb); got != 80 {
				t.Fatalf("stock %d after 20 sales from 100, want 80", got)
			}
			lg.check(t, 100, 80)
			if hooks[0].n.Load()+hooks[1].n.Load() == 0 {
				t.Fatal("no claim carried its sale's read: every hand-over cost its own round trip")
			}
			if w := hooks[0].writes.Load() + hooks[1].writes.Load(); w != 20 {
				t.Fatalf("%d of 20 sales' writes left with their release, want every one", w)
			}
		})
	}
}

// The claim that carries a read finds its grant taken back, in each order:
// passed on to the next waiter at the claim deadline before the claim
// arrives, or expired with no check to pass it on (the releasing process's
// check switched off). The read that rode with it is dropped: the sale waits
// again, reads again once it holds the lock, and never writes on the failed
// claim. The checker finds one holder at a time and no lost update.
func TestTakenBackClaimDropsItsRead(t *testing.T) {
	for _, order := range []string{"passed on", "expired"} {
		t.Run(order, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client()
			ctx := context.Background()
			setStock(t, rdb, 10)
			keys := handoff.For(api.DefaultLockKey)
			late := &rides{}
			late.hold = func() { // the late waiter's claim waits until its grant is gone
				locktest.WaitFor(t, 5*time.Second, "the late waiter's grant taken back", func() bool {
					if order == "passed on" {
						return rdb.Get(ctx, keys.Passed).Val() == "1"
					}
					return rdb.Exists(ctx, keys.Lock).Val() == 0
				})
			}
			a, b := newReplica(t, srv, "a", false), newReplica(t, srv, "b", false, late)
			var lg ledger
			hctx := ctx
			if order == "expired" {
				hctx = chaos.With(ctx, chaos.Faults{Off: chaos.Off{Claim: true}})
			}
			holding, thaw := make(chan struct{}), make(chan struct{})
			hctx = chaos.With(hctx, chaos.Faults{Off: chaos.From(hctx).Off, BeforeWrite: func(context.Context) {
				close(holding)
				<-thaw
			}})
			done := make(chan error, 3)
			go func() { _, err := lg.sell(hctx, a, "holder"); done <- err }()
			<-holding
			go func() { _, err := lg.sell(ctx, b, "late"); done <- err }()
			locktest.WaitFor(t, 5*time.Second, "the late waiter queued", func() bool { return rdb.ZCard(ctx, keys.Queue).Val() == 1 })
			if order == "passed on" {
				go func() { _, err := lg.sell(ctx, a, "next"); done <- err }()
				locktest.WaitFor(t, 5*time.Second, "the next waiter queued", func() bool { return rdb.ZCard(ctx, keys.Queue).Val() == 2 })
			}
			close(thaw)
			sales := 2
			if order == "passed on" {
				sales = 3
			}
			for range sales {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if late.n.Load() == 0 {
				t.Fatal("the late waiter's claim carried no read: the order under test did not happen")
			}
			want := int64(10 - sales)
			if got := stock(t, rdb); int64(got) != want {
				t.Fatalf("stock %d, want %d: a sale wrote on a read its failed claim carried", got, want)
			}
			for _, s := range lg.sales {
				if s.ID == "late" && s.Read.Value != want+1 {
					t.Fatalf("the late sale read %d, want %d: it used the read its failed claim carried", s.Read.Value, want+1)
				}
			}
			lg.check(t, 10, want)
		})
	}
}

// A waiter that dies after queueing (it never claims) costs the queue one
// claim deadline: the live sale behind it is handed the lock then, its claim
// carrying its read, and sells exactly once.
func TestDeadWaiterThenRidingClaim(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	setStock(t, rdb, 10)
	keys := handoff.For(api.DefaultLockKey)
	hook := &rides{}
	a, b := newReplica(t, srv, "a", false), newReplica(t, srv, "b", false, hook)
	var lg ledger
	holding, thaw := make(chan struct{}), make(chan struct{})
	hctx := chaos.With(ctx, chaos.Faults{BeforeWrite: func(context.Context) {
		close(holding)
		<-thaw
	}})
	done := make(chan error, 2)
	go func() { _, err := lg.sell(hctx, a, "holder"); done <- err }()
	<-holding
	// The dead waiter: queued on a channel nobody reads, never claiming.
	if err := rdb.Eval(ctx, `redis.call('ZADD', KEYS[1], 1, 'dead'); redis.call('HSET', KEYS[2], 'dead', ARGV[1] .. ' 0 nobody'); return 1`,
		[]string{keys.Queue, keys.Deadlines}, time.Now().Add(time.Minute).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	go func() { _, err := lg.sell(ctx, b, "alive"); done <- err }()
	locktest.WaitFor(t, 5*time.Second, "the live sale queued behind the dead waiter", func() bool { return rdb.ZCard(ctx, keys.Queue).Val() == 2 })
	close(thaw)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n, err := rdb.Get(ctx, keys.Passed).Int(); err != nil || n != 1 {
		t.Fatalf("passes counter %d (%v), want 1: the dead waiter's grant passed on at its claim deadline", n, err)
	}
	if hook.n.Load() != 1 || stock(t, rdb) != 8 {
		t.Fatalf("%d riding claims, stock %d; want the live sale's claim to carry its read, the stock at 8", hook.n.Load(), stock(t, rdb))
	}
	lg.check(t, 10, 8)
}
