package retry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// roundTrips counts a client's round trips: a command or a pipeline each,
// not a new connection's own set-up (HELLO).
type roundTrips struct{ n int }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" {
			r.n++
		}
		return next(ctx, cmd)
	}
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.n++; return next(ctx, cmds) }
}

// A claim carries its holder's first command (lease.Rider) in the same round
// trip, and Redis runs the claim first: the command sees the lock already
// the claimer's with the version's own lease (v3: none), never the grant's
// claim deadline. v3 to v8, fenced or not; the command gets the grant's
// token.
func TestClaimRunsBeforeItsRider(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const ttl = 20 * time.Second
	for _, fenced := range []bool{false, true} {
		for name, g := range queuers(rdb, fmt.Sprint("rider-", fenced), ttl, fenced) {
			t.Run(fmt.Sprint(name, " fenced=", fenced), func(t *testing.T) {
				key := fmt.Sprint("rider-", fenced)
				holder, err := g.TryOrQueue(ctx, "holder", waiter(time.Minute, false))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := g.TryOrQueue(ctx, "next", waiter(time.Minute, false)); !errors.Is(err, lease.ErrTaken) {
					t.Fatalf("next: %v, want queued", err)
				}
				release(t, holder)
				var pttl *redis.DurationCmd
				var token int64 = -1
				r := lease.NewRider(func(pipe redis.Pipeliner, tok int64) {
					pttl, token = pipe.PTTL(context.Background(), key), tok
				})
				// The claimer's own client, counting its round trips.
				rt := &roundTrips{}
				crdb := srv.Client()
				crdb.AddHook(rt)
				cg := queuers(crdb, key, ttl, fenced)[name]
				// The claim script loaded: a claim whose script Redis lacks
				// (NOSCRIPT) claims on its own, and its command does not ride.
				if _, err := cg.Granted(ctx, "nobody", 0); !errors.Is(err, lease.ErrTaken) {
					t.Fatalf("a claim of nothing: %v, want lease.ErrTaken", err)
				}
				rt.n = 0
				want := holder.Token() + 1
				if !fenced {
					want = 0
				}
				l, err := cg.Granted(lease.WithRider(ctx, r), "next", want)
				if err != nil {
					t.Fatalf("claim: %v", err)
				}
				defer release(t, l)
				if _, rode := r.Rode(); !rode || rt.n != 1 {
					t.Fatalf("rode %v in %d round trips, want the command to ride with the claim in one", rode, rt.n)
				}
				got, err := pttl.Result()
				if err != nil {
					t.Fatal(err)
				}
				if name == "v3" && got != -1 || name != "v3" && got <= claim {
					t.Fatalf("the command saw the lock's PTTL %v, want the version's lease (v3: none): it ran before the claim", got)
				}
				if token != want || l.Token() != want {
					t.Fatalf("the command got token %d, the lease %d; want the grant's, %d", token, l.Token(), want)
				}
			})
		}
	}
}

// A claim that finds its grant passed on carries its command all the same
// (one round trip), but the rider is told it did not ride: the command's
// reply is not the holder's, and the claimer holds nothing.
func TestLateClaimRiderDoesNotRide(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for _, name := range []string{"v3", "v6", "v8"} {
		t.Run(name, func(t *testing.T) {
			key := "late-rider-" + name
			g := queuers(rdb, key, 20*time.Second, true)[name]
			holder, err := g.TryOrQueue(ctx, "holder", waiter(time.Minute, false))
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range []string{"slow", "next"} {
				if _, err := g.TryOrQueue(ctx, w, waiter(time.Minute, false)); !errors.Is(err, lease.ErrTaken) {
					t.Fatalf("%s: %v, want queued", w, err)
				}
			}
			release(t, holder)
			locktest.WaitFor(t, 5*time.Second, "the grant passed to the next waiter", func() bool { return holds(rdb, key, "next") })
			sent := 0
			r := lease.NewRider(func(pipe redis.Pipeliner, _ int64) { sent++; pipe.Get(context.Background(), key) })
			if _, err := g.Granted(lease.WithRider(ctx, r), "slow", holder.Token()+1); !errors.Is(err, lease.ErrTaken) {
				t.Fatalf("slow's late claim: %v, want lease.ErrTaken", err)
			}
			if _, rode := r.Rode(); rode || sent != 1 {
				t.Fatalf("rode %v, sent %d times; want sent once with the claim, not ridden", rode, sent)
			}
			assertHolder(t, rdb, key, "next")
			l, err := g.Granted(ctx, "next", holder.Token()+2)
			if err != nil {
				t.Fatalf("next's claim: %v", err)
			}
			release(t, l)
		})
	}
}
