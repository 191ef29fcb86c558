package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/locklab/locklab/internal/locks/retry"
	setnx "github.com/locklab/locklab/internal/locks/v3_setnx"
	lua "github.com/locklab/locklab/internal/locks/v6_lua"
	reentrant "github.com/locklab/locklab/internal/locks/v7_reentrant"
	watchdog "github.com/locklab/locklab/internal/locks/v8_watchdog"
	"github.com/locklab/locklab/internal/locktest"
	"github.com/locklab/locklab/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// claim is the tests' claim deadline: short, so a dead waiter's grant
// passes on quickly, and long enough for a live waiter on a busy machine.
const claim = 150 * time.Millisecond

// queuers are v3 to v8 built for -wait handoff on key, with lease ttl (v3
// has none), fenced or not.
func queuers(rdb *redis.Client, key string, ttl time.Duration, fenced bool) map[string]retry.Queuer {
	hash := reentrant.Options{Key: key, TTL: ttl, Fence: fenced, Handoff: true, Claim: claim}
	return map[string]retry.Queuer{
		"v3": setnx.New(rdb, setnx.Options{Key: key, Fence: fenced, Handoff: true, Claim: claim}),
		"v4": setnx.New(rdb, setnx.Options{Key: key, TTL: ttl, Fence: fenced, Handoff: true, Claim: claim}),
		"v5": setnx.New(rdb, setnx.Options{Key: key, TTL: ttl, OwnerCheck: true, Fence: fenced, Handoff: true, Claim: claim}),
		"v6": lua.New(rdb, lua.Options{Key: key, TTL: ttl, Fence: fenced, Handoff: true, Claim: claim}),
		"v7": reentrant.New(rdb, hash),
		"v8": watchdog.New(rdb, hash, nil, nil),
	}
}

// waiter queues with a channel nobody listens on: the tests that call
// TryOrQueue themselves set the order of events, and read Redis.
func waiter(wait time.Duration, queued bool) handoff.Waiter {
	return handoff.Waiter{Channel: "test-grants", Wait: wait, Queued: queued}
}

// handedOff is g waiting by hand-off through its own Notifier: a replica. The
// backstop is a minute, so a waiter that is served was handed the lock.
func handedOff(t *testing.T, rdb *redis.Client, key string, g retry.Queuer, count retry.Counter) *retry.HandedOff {
	return retry.Handoff(g, notifier(t, rdb, key, time.Minute), count)
}

// Two replicas' waiters, through hand-offs only, never overlap and lose no
// update, fenced or not; and fenced, each holder's token is newer.
func TestHandoffExcludesAcrossProcesses(t *testing.T) {
	rdb := redistest.Start(t).Client()
	for _, fenced := range []bool{false, true} {
		for name, g := range queuers(rdb, fmt.Sprint("lock-", fenced), 20*time.Second, fenced) {
			t.Run(fmt.Sprint(name, " fenced=", fenced), func(t *testing.T) {
				key := fmt.Sprint("lock-", fenced)
				locktest.Exclusion(t, rdb, handedOff(t, rdb, key, g, nil), handedOff(t, rdb, key, g, nil))
				if fenced {
					locktest.Tokens(t, handedOff(t, rdb, key, g, nil))
				}
				if n := rdb.Exists(context.Background(), key, key+":handoff", key+":handoff:deadlines").Val(); n != 0 {
					t.Fatalf("%d of the lock and its queue's keys left behind", n)
				}
			})
		}
	}
}

// Waiters queued through two replicas are served in arrival order, each with
// one attempt (the one that queued it); fenced, each handed a newer token.
func TestHandoffServesInArrivalOrder(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for name := range queuers(rdb, "", 0, false) {
		t.Run(name, func(t *testing.T) {
			key := "order-" + name
			var (
				mu       sync.Mutex
				order    []int
				tokens   []int64
				attempts []int
				wg       sync.WaitGroup
			)
			count := func(n int) { mu.Lock(); attempts = append(attempts, n); mu.Unlock() }
			procs := []*retry.HandedOff{}
			for range 2 {
				procs = append(procs, handedOff(t, rdb, key, queuers(rdb, key, 20*time.Second, true)[name], count))
			}
			held, err := procs[0].Acquire(ctx, "holder")
			if err != nil {
				t.Fatal(err)
			}
			const waiters = 6
			for i := range waiters {
				wg.Go(func() {
					l, err := procs[i%2].Acquire(ctx, fmt.Sprint("waiter-", i))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					order, tokens = append(order, i), append(tokens, l.Token())
					mu.Unlock()
					if err := l.Release(ctx); err != nil {
						t.Error(err)
					}
				})
				// The next waiter arrives only once this one is in the queue.
				locktest.WaitFor(t, 5*time.Second, "waiter in the queue", func() bool {
					return rdb.ZCard(ctx, key+":handoff").Val() == int64(i+1)
				})
			}
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			for i, got := range order {
				if got != i {
					t.Fatalf("served in order %v, want 0..%d", order, waiters-1)
				}
				if tokens[i] != held.Token()+int64(i)+1 {
					t.Fatalf("tokens %v after the holder's %d: each hand-off must issue the next", tokens, held.Token())
				}
			}
			for _, n := range attempts {
				if n != 1 {
					t.Fatalf("attempts per acquisition %v, want 1 each: a waiter handed the lock makes no attempt (its claim is none)", attempts)
				}
			}
			if n := rdb.Exists(ctx, key, key+":handoff", key+":handoff:deadlines", key+":handoff:granted").Val(); n != 0 {
				t.Fatalf("%d of the lock and its queue's keys left behind", n)
			}
		})
	}
}

// The give-up race, in both orders, on the string lock and the hash: a
// waiter handed the lock while it leaves passes it on to the next waiter; a
// waiter that left before the release is skipped by it.
func TestHandoffGiveUpRace(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for _, name := range []string{"v6", "v7"} {
		for _, grantedFirst := range []bool{true, false} {
			t.Run(fmt.Sprint(name, " granted first=", grantedFirst), func(t *testing.T) {
				key := fmt.Sprint("race-", name, grantedFirst)
				g := queuers(rdb, key, 20*time.Second, false)[name]
				holder, err := g.TryOrQueue(ctx, "holder", waiter(time.Minute, false))
				if err != nil {
					t.Fatal(err)
				}
				// Two waiters queue; neither waits on a subscription, so the
				// order of events is the test's.
				for _, w := range []string{"leaver", "next"} {
					if _, err := g.TryOrQueue(ctx, w, waiter(time.Minute, false)); !errors.Is(err, lease.ErrTaken) {
						t.Fatalf("%s: %v, want queued", w, err)
					}
				}
				if grantedFirst {
					release(t, holder)
					assertHolder(t, rdb, key, "leaver")
					if err := g.Leave(ctx, "leaver"); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := g.Leave(ctx, "leaver"); err != nil {
						t.Fatal(err)
					}
					release(t, holder)
				}
				assertHolder(t, rdb, key, "next")
				l, err := g.TryOrQueue(ctx, "next", waiter(time.Minute, true)) // its backstop check finds the grant
				if err != nil {
					t.Fatalf("the next waiter was not told it holds the lock: %v", err)
				}
				release(t, l)
				if n := rdb.Exists(ctx, key, key+":handoff", key+":handoff:deadlines").Val(); n != 0 {
					t.Fatalf("%d of the lock and its queue's keys left behind", n)
				}
			})
		}
	}
}

// The same race through Acquire: a waiter whose context ends as the lock is
// handed to it either returns the lease or passes it on; either way the
// waiter behind it is served, and nothing is left behind.
func TestHandoffGiveUpRaceThroughAcquire(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	g := handedOff(t, rdb, "lock", queuers(rdb, "lock", 20*time.Second, false)["v6"], nil)
	for i := range 20 {
		held, err := g.Acquire(ctx, fmt.Sprint("holder-", i))
		if err != nil {
			t.Fatal(err)
		}
		lctx, cancel := context.WithCancel(ctx)
		leaver := make(chan error, 1)
		go func() {
			l, err := g.Acquire(lctx, fmt.Sprint("leaver-", i))
			if err == nil {
				err = l.Release(ctx)
			}
			leaver <- err
		}()
		locktest.WaitFor(t, 5*time.Second, "the leaver queued", func() bool { return rdb.ZCard(ctx, "lock:handoff").Val() == 1 })
		next := takeAndGive(ctx, g, fmt.Sprint("next-", i))
		locktest.WaitFor(t, 5*time.Second, "the next waiter queued", func() bool { return rdb.ZCard(ctx, "lock:handoff").Val() == 2 })
		go cancel() // races the release below
		release(t, held)
		if err := <-leaver; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if err := <-next; err != nil {
			t.Fatalf("the waiter behind the leaver: %v", err)
		}
		if n := rdb.Exists(ctx, "lock", "lock:handoff", "lock:handoff:deadlines").Val(); n != 0 {
			t.Fatalf("round %d: %d of the lock and its queue's keys left behind", i, n)
		}
	}
}

// A waiter that died while queued (its replica killed) is handed the lock,
// never claims it, and at the claim deadline the releasing process takes the
// grant back and hands the lock to the live waiter behind it: the queue moves
// on after one claim deadline, not a lease (v6, v8: 20 s here), and not never
// (v3, whose own lock has no expiry). The live waiter's backstop is a minute,
// so only that hand-over can serve it. Nothing holds the lock twice: the dead
// waiter's grant is gone once the live one holds it.
func TestHandoffDeadWaiter(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	const ttl = 20 * time.Second
	for _, name := range []string{"v3", "v6", "v8"} {
		t.Run(name, func(t *testing.T) {
			key := "dead-" + name
			g := queuers(rdb, key, ttl, true)[name]
			holder, err := g.TryOrQueue(ctx, "holder", waiter(time.Minute, false))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := g.TryOrQueue(ctx, "dead", waiter(time.Minute, false)); !errors.Is(err, lease.ErrTaken) {
				t.Fatalf("the waiter that dies: %v, want queued", err)
			}
			w := handedOff(t, rdb, key, g, nil)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got := make(chan lease.Lease, 1)
			go func() {
				l, err := w.Acquire(wctx, "alive")
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			locktest.WaitFor(t, 5*time.Second, "the live waiter queued", func() bool { return rdb.ZCard(ctx, key+":handoff").Val() == 2 })
			released := time.Now()
			release(t, holder)
			l := <-got
			if l == nil {
				return
			}
			waited := time.Since(released)
			if waited < claim {
				t.Fatalf("the live waiter was served %s after the release, before the dead waiter's claim deadline (%s)", waited, claim)
			}
			if waited > ttl/2 {
				t.Fatalf("the live waiter was served %s after the release: the dead waiter's grant was not passed on at its claim deadline (%s)", waited, claim)
			}
			assertHolder(t, rdb, key, "alive")
			if n, err := rdb.Get(ctx, handoff.For(key).Passed).Int(); err != nil || n != 1 {
				t.Fatalf("passes counter %d (%v), want 1: the releasing process's check passed the dead waiter's grant on", n, err)
			}
			if l.Token() <= holder.Token()+1 {
				t.Fatalf("token %d after the holder's %d: the dead waiter's grant and the live one's each issue one", l.Token(), holder.Token())
			}
			// The claimed lease is the version's own: none for v3, the TTL otherwise.
			pttl := rdb.PTTL(ctx, key).Val()
			if name == "v3" && pttl != -1 || name != "v3" && pttl <= claim {
				t.Fatalf("after the claim the lock's PTTL is %v, want the version's lease (v3: none)", pttl)
			}
			release(t, l)
			t.Logf("%s: served %s after the release (claim deadline %s)", name, waited.Round(time.Millisecond), claim)
		})
	}
}

// A live waiter that claims its grant too late finds it gone: it holds
// nothing (lease.ErrTaken), and the lock is the next waiter's. Its claim
// cannot take the lock from that waiter.
func TestHandoffLateClaim(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for _, name := range []string{"v3", "v4", "v7"} {
		t.Run(name, func(t *testing.T) {
			key := "late-" + name
			g := queuers(rdb, key, 20*time.Second, false)[name]
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
			assertHolder(t, rdb, key, "slow")
			// No claim from slow: at the deadline the grant passes to next.
			locktest.WaitFor(t, 5*time.Second, "the grant passed to the next waiter", func() bool {
				return holds(rdb, key, "next")
			})
			if _, err := g.Granted(ctx, "slow", 0); !errors.Is(err, lease.ErrTaken) {
				t.Fatalf("slow's late claim: %v, want lease.ErrTaken", err)
			}
			assertHolder(t, rdb, key, "next")
			l, err := g.Granted(ctx, "next", 0)
			if err != nil {
				t.Fatalf("next's claim: %v", err)
			}
			release(t, l)
		})
	}
}

// A nested v7 or v8 acquisition takes a hold at once, never queued behind the
// waiters for the lock its owner holds; only the outermost release hands the
// lock over.
func TestHandoffNested(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for _, name := range []string{"v7", "v8"} {
		t.Run(name, func(t *testing.T) {
			key := "nested-" + name
			g := handedOff(t, rdb, key, queuers(rdb, key, 20*time.Second, true)[name], nil)
			outer, err := g.Acquire(ctx, "owner")
			if err != nil {
				t.Fatal(err)
			}
			done := takeAndGive(ctx, g, "other")
			locktest.WaitFor(t, 5*time.Second, "the other owner queued", func() bool { return rdb.ZCard(ctx, key+":handoff").Val() == 1 })
			nctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			inner, err := g.Acquire(nctx, "owner")
			if err != nil {
				t.Fatalf("nested acquisition: %v", err)
			}
			if inner.Token() != outer.Token() {
				t.Fatalf("nested token %d, outer %d: one holder, one token", inner.Token(), outer.Token())
			}
			release(t, inner)
			assertHolder(t, rdb, key, "owner")
			release(t, outer)
			if err := <-done; err != nil {
				t.Fatalf("the other owner: %v", err)
			}
		})
	}
}

// v6 is not reentrant: with hand-off too, an owner asking again waits on
// itself until its deadline, and leaves nothing queued.
func TestHandoffV6WaitsOnItself(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	g := handedOff(t, rdb, "lock", queuers(rdb, "lock", 20*time.Second, false)["v6"], nil)
	held, err := g.Acquire(ctx, "owner")
	if err != nil {
		t.Fatal(err)
	}
	locktest.Waits(t, g, "owner")
	if n := rdb.Exists(ctx, "lock:handoff").Val(); n != 0 {
		t.Fatal("the waiter that gave up is still queued")
	}
	release(t, held)
}

func release(t *testing.T, l lease.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// assertHolder fails unless owner holds key's lock, a string or a hash.
func assertHolder(t *testing.T, rdb *redis.Client, key, owner string) {
	t.Helper()
	ctx := context.Background()
	if v, err := rdb.Get(ctx, key).Result(); err == nil {
		if v != owner {
			t.Fatalf("%s holds %s, want %s", v, key, owner)
		}
		return
	}
	if held, err := rdb.HExists(ctx, key, owner).Result(); err != nil || !held {
		t.Fatalf("%s does not hold %s (%v): %v", owner, key, rdb.HGetAll(ctx, key).Val(), err)
	}
}

// A queued waiter whose deadline has passed (it died without leaving) is
// skipped by the release: the lock goes to the live waiter behind it.
func TestHandoffSkipsExpiredEntries(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	g := queuers(rdb, "lock", 20*time.Second, false)["v4"]
	holder, err := g.TryOrQueue(ctx, "holder", waiter(time.Minute, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.TryOrQueue(ctx, "expired", waiter(time.Millisecond, false)); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("expired: %v, want queued", err)
	}
	if _, err := g.TryOrQueue(ctx, "live", waiter(time.Minute, false)); !errors.Is(err, lease.ErrTaken) {
		t.Fatalf("live: %v, want queued", err)
	}
	entry, err := rdb.HGet(ctx, "lock:handoff:deadlines", "expired").Result()
	if err != nil {
		t.Fatal(err)
	}
	var deadline, fenced int64
	var channel string
	if _, err := fmt.Sscanf(entry, "%d %d %s", &deadline, &fenced, &channel); err != nil || fenced != 0 || channel != "test-grants" {
		t.Fatalf("queue entry %q: want '<deadline ms> 0 test-grants' (%v)", entry, err)
	}
	locktest.WaitFor(t, 5*time.Second, "Redis's clock past the entry's deadline", func() bool {
		now, err := rdb.Time(ctx).Result()
		return err == nil && now.UnixMilli() > deadline
	})
	release(t, holder)
	assertHolder(t, rdb, "lock", "live")
	if n := rdb.HLen(ctx, "lock:handoff:deadlines").Val() + rdb.ZCard(ctx, "lock:handoff").Val(); n != 0 {
		t.Fatalf("%d queue entries left: the expired one must be dropped", n)
	}
}

// Each grant is published on the channel its waiter queued with, and on no
// other: a replica's subscription receives only its own waiters' grants. On
// the string lock and the hash, fenced: two waiters of two replicas are
// served in turn, and one subscription to both replicas' channels and
// notify's sees exactly those two grants, in order, then a marker.
func TestHandoffGrantsOnlyToItsReplica(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{"v4", "v7"} {
		t.Run(name, func(t *testing.T) {
			key := "lock-" + name
			keys := handoff.For(key)
			a, b := keys.Grants("a"), keys.Grants("b")
			sub := rdb.Subscribe(ctx, a, b, retry.WakeChannel(key))
			defer sub.Close()
			for range 3 {
				if _, err := sub.Receive(ctx); err != nil {
					t.Fatal(err)
				}
			}
			g := queuers(rdb, key, 20*time.Second, true)[name]
			holder, err := g.TryOrQueue(ctx, "holder", waiter(time.Minute, false))
			if err != nil {
				t.Fatal(err)
			}
			for w, channel := range map[string]string{"on-a": a, "on-b": b} {
				if _, err := g.TryOrQueue(ctx, w, handoff.Waiter{Channel: channel, Wait: time.Minute}); !errors.Is(err, lease.ErrTaken) {
					t.Fatalf("%s: %v, want queued", w, err)
				}
			}
			// Map order is random: whichever queued first is served first.
			first, _ := rdb.ZRange(ctx, keys.Queue, 0, 0).Result()
			if len(first) != 1 {
				t.Fatalf("queue %v", first)
			}
			order := []string{"on-a", "on-b"}
			if first[0] == "on-b" {
				order = []string{"on-b", "on-a"}
			}
			release(t, holder)
			var last int64
			for _, w := range order {
				msg, err := sub.ReceiveMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]string{"on-a": a, "on-b": b}[w]
				grant, err := handoff.ParseGrant(msg.Payload)
				if err != nil || msg.Channel != want || grant.Owner != w || grant.Token <= last {
					t.Fatalf("got %q on %s (%v), want %s's grant with a token above %d on %s", msg.Payload, msg.Channel, err, w, last, want)
				}
				last = grant.Token
				l, err := g.Granted(ctx, w, grant.Token)
				if err != nil {
					t.Fatalf("%s claiming its grant: %v", w, err)
				}
				release(t, l)
			}
			if err := rdb.Publish(ctx, a, "marker").Err(); err != nil {
				t.Fatal(err)
			}
			if msg, err := sub.ReceiveMessage(ctx); err != nil || msg.Payload != "marker" {
				t.Fatalf("after the two grants: %v (%v), want the marker: nothing else was published", msg, err)
			}
			if n := rdb.Exists(ctx, key, keys.Queue, keys.Deadlines, keys.Granted).Val(); n != 0 {
				t.Fatalf("%d of the lock and its queue's keys left behind", n)
			}
		})
	}
}

// A waiter with no channel to be told on is refused, not queued where no
// grant could reach it.
func TestHandoffNeedsAChannel(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for _, name := range []string{"v4", "v7"} {
		key := "nochannel-" + name
		g := queuers(rdb, key, 20*time.Second, false)[name]
		holder, err := g.TryOrQueue(ctx, "holder", waiter(time.Minute, false))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := g.TryOrQueue(ctx, "w", handoff.Waiter{Wait: time.Minute}); err == nil || errors.Is(err, lease.ErrTaken) {
			t.Fatalf("%s: a waiter with no channel: %v, want an error", name, err)
		}
		if n := rdb.ZCard(ctx, key+":handoff").Val(); n != 0 {
			t.Fatalf("%s: %d queued", name, n)
		}
		release(t, holder)
	}
}

// A grant's message carries the owner and its token; notify's carries the
// owner alone; anything else is refused.
func TestParseGrant(t *testing.T) {
	for payload, want := range map[string]handoff.Grant{"a:1 7": {Owner: "a:1", Token: 7}, "a:1 0": {Owner: "a:1"}, "a:1": {Owner: "a:1"}} {
		if got, err := handoff.ParseGrant(payload); err != nil || got != want {
			t.Errorf("ParseGrant(%q) = %+v, %v; want %+v", payload, got, err, want)
		}
	}
	if _, err := handoff.ParseGrant("a:1 x"); err == nil {
		t.Error("a bad token parsed")
	}
}

// holds reports whether owner holds key, a string lock or a hash lock.
func holds(rdb *redis.Client, key, owner string) bool {
	ctx := context.Background()
	if v, err := rdb.Get(ctx, key).Result(); err == nil {
		return v == owner
	}
	return rdb.HExists(ctx, key, owner).Val()
}
