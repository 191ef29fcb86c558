// Package etcd is the CP row: a lock on a consensus system (seeds 002 and
// 004: etcd, ZooKeeper, "强一致性 / CP 系统"), through etcd's own recipe,
// go.etcd.io/etcd/client/v3/concurrency.
//
// Each acquisition opens a Session, a lease of -ttl kept alive by the client
// ("租约"), and a Mutex on a prefix derived from the lock key: the waiter puts
// a key under the prefix with its lease, and the oldest key holds the lock.
// A waiter watches only the key just before its own ("前缀 + revision": no
// thundering herd, woken instead of polling), so waiting is the mutex's own,
// not package retry's. The fencing token is the holder's key's create
// revision: cluster-wide, durable, and larger for every later holder (seed
// 003's resource-side version number).
//
// The lease's Lost channel closes at the lease's own deadline, counted from
// the sending of the grant or of the holder's last keep-alive that
// succeeded, less a drift margin (see watch), or when the session ends.
//
// Every request to etcd carries a deadline: with no quorum, or cut off from
// its members, etcd never answers, and a request without one waits for
// minutes (holding its sale, and its -max-in-flight slot, until nginx gives
// up and says the sale may have happened). Waiting for the lock is bounded
// by the caller's context (the sale's -acquire-timeout); every other request
// by RequestTimeout (the mutex's own included: its KV requests go through a
// bounded view of the client, see New), a revocation by revokeTimeout, a
// keep-alive by a third of the lease. The session's keep-alive stream lasts
// as long as the hold and is stopped at its release.
//
// What it fixes: a Raft majority decides, so a member's failure loses neither
// the lock nor a token; waiters are served in arrival order. What it does not
// fix: a holder paused past its lease (a GC pause, SIGSTOP) loses the lock
// while it still believes it holds it, and writes anyway, unless the storage
// checks its token. And it is not reentrant: a holder that asks again waits
// on itself, like v6.
package etcd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/step"
	"github.com/locklab/locklab/internal/step/stepetcd"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// Dial returns a client of the etcd members at endpoints (host:port). It
// does not wait for them: a member that is down is tried again by the
// client, and a request finds out under its own deadline (with no quorum,
// etcd never answers, so every request here carries one). Its own log is
// off: every failure it would log reaches the caller as an error. The step
// gate is in it (stepetcd): a sale the lab steps stops before each request;
// any other pays one context lookup.
func Dial(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, Logger: zap.NewNop(),
		DialKeepAliveTime: keepAliveTime, DialKeepAliveTimeout: keepAliveTimeout,
		DialOptions: stepetcd.DialOptions(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: client of %v: %w", endpoints, err)
	}
	return cli, nil
}

// A member that stops answering (killed, frozen, cut off) is noticed by the
// client within keepAliveTime+keepAliveTimeout, and it moves to another.
const (
	keepAliveTime    = 2 * time.Second
	keepAliveTimeout = time.Second
)

// RequestTimeout bounds each request to etcd that is not the wait for the
// lock: a lease's grant, one attempt, the token's read, a release. Long
// enough for the client to notice a member that stopped answering and ask
// another (keepAliveTime+keepAliveTimeout, and a second for the request);
// short enough that a sale cut off from etcd is answered, unavailable and
// nothing sold, long before nginx gives up on it (proxy_read_timeout 25 s).
const RequestTimeout = keepAliveTime + keepAliveTimeout + time.Second

// revokeTimeout bounds a lease's revocation: best effort, since the lease
// expires by itself at its TTL.
const revokeTimeout = time.Second

// Options configure a Locker. The zero value is a 20 s lease on the key "lock".
type Options struct {
	Key   string        // the lock key; the mutex's prefix is Key + "/"
	TTL   time.Duration // the session's lease, in whole seconds (at least 1); default 20 s
	Fence bool          // hand out the holder's key's create revision as its token
}

// Locker is an etcd lock, safe for concurrent use.
type Locker struct {
	cli    *clientv3.Client
	key    string // the mutex's name: concurrency.Mutex adds the "/"
	prefix string // its keys' prefix, key + "/"
	ttl    int
	fence  bool
}

// New returns a Locker over cli. It talks to etcd through a view of cli
// whose every KV request carries RequestTimeout: the concurrency package's
// mutex sends some with the client's own context, which has no deadline
// (deleting its waiting key when a wait fails). Its watches are cli's, less
// the deletions a request that switched its wake-up off is not told of
// (see deaf).
func New(cli *clientv3.Client, opts Options) *Locker {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	if opts.TTL <= 0 {
		opts.TTL = 20 * time.Second
	}
	view := clientv3.NewCtxClient(cli.Ctx())
	kv := bounded{cli.KV}
	view.KV, view.Lease, view.Watcher = kv, cli.Lease, deaf{ahead{cli.Watcher, kv}}
	return &Locker{cli: view, key: opts.Key, prefix: opts.Key + "/", ttl: max(1, int(math.Ceil(opts.TTL.Seconds()))), fence: opts.Fence}
}

// Prefix is the mutex's key prefix: a waiter's key is the prefix and its
// lease id.
func (l *Locker) Prefix() string { return l.prefix }

// Acquire waits for the lock until ctx ends: its session's key joins the
// queue under the prefix, and it waits for the keys before it to go. The
// lease it returns is lost (Lost closed) when the session ends: its lease
// expired, or keeping it alive failed. owner names nothing in etcd (the
// session's lease does); a nested acquisition by the same owner is a new
// waiter, behind the hold it already has.
func (l *Locker) Acquire(ctx context.Context, _ string) (lease.Lease, error) {
	return l.acquire(ctx, func(m *concurrency.Mutex) error { return m.Lock(ctx) })
}

// TryAcquire makes one attempt: the lock, or lease.ErrTaken at once when
// another session holds it.
func (l *Locker) TryAcquire(ctx context.Context, _ string) (lease.Lease, error) {
	return l.acquire(ctx, func(m *concurrency.Mutex) error {
		err := m.TryLock(ctx)
		if errors.Is(err, concurrency.ErrLocked) {
			return lease.ErrTaken
		}
		return err
	})
}

func (l *Locker) acquire(ctx context.Context, lock func(*concurrency.Mutex) error) (lease.Lease, error) {
	// The lease is granted under the request's deadline and RequestTimeout
	// (with no quorum, etcd never answers); its session, which keeps it alive, outlives the
	// deadline (for as long as the sale runs) but not the release.
	sent := time.Now()
	gctx, cancel := context.WithTimeout(ctx, step.Timeout(ctx, RequestTimeout))
	// lesson:begin etcd
	granted, err := l.cli.Grant(gctx, int64(l.ttl))
	cancel()
	if err != nil {
		return nil, l.failed(ctx, "grant a lease", err)
	}
	s, err := concurrency.NewSession(l.cli, concurrency.WithLease(granted.ID), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		l.revoke(ctx, granted.ID)
		return nil, l.failed(ctx, "open a session", err)
	}
	// A stepped sale's lease counts from the grant as the learner let it
	// go, not from before the gate (step.Sent): time stopped there is not
	// the lease's.
	k := l.watch(ctx, s, step.Sent(ctx, sent), granted.TTL)
	closeSession := func(ctx context.Context) {
		k.stop()
		l.closeSession(ctx, s)
	}
	m := concurrency.NewMutex(s, l.key)
	if err := lock(m); err != nil {
		closeSession(ctx)
		if errors.Is(err, lease.ErrTaken) {
			return nil, err
		}
		return nil, l.failed(ctx, "lock", err)
	}
	// lesson:end
	var token int64
	if l.fence {
		if token, err = l.createRevision(ctx, m); err != nil {
			// Revoking the lease deletes the holder's key with it; if etcd
			// does not answer, the lease ends by itself at its TTL. Either
			// way nothing was sold: the error is etcd's (unavailable), not
			// the lock's.
			closeSession(ctx)
			return nil, fmt.Errorf("etcd: lock %s obtained, its token not read: %w", l.prefix, err)
		}
	}
	release := func(ctx context.Context) error {
		defer closeSession(ctx)
		return l.release(ctx, m)
	}
	return lease.Timed(release, token, k.valid), nil
}

// kept is a session's lease as this holder knows it: valid until its
// deadline, which the holder's own keep-alives move on.
type kept struct {
	valid *lease.Deadline
	quit  chan struct{}
	done  chan struct{}
}

func (k kept) stop() {
	close(k.quit)
	<-k.done
	k.valid.Stop()
}

// watch keeps the validity of s's lease, granted ttl seconds by a request
// sent at sent: its Lost closes at the deadline counted from that sending,
// less a drift margin. The session keeps the lease alive by itself, but its
// client counts the lease's end from when a keep-alive's reply arrived, and
// says so late; so this holder sends its own keep-alive every third of the
// lease and counts from when it sent it. A hold shorter than that (every
// sale at normal speed) sends none. The session ending (its lease gone)
// closes Lost at once.
func (l *Locker) watch(ctx context.Context, s *concurrency.Session, sent time.Time, ttl int64) kept {
	d := time.Duration(ttl) * time.Second
	k := kept{valid: lease.NewDeadline(lease.ValidUntil(sent, d), nil), quit: make(chan struct{}), done: make(chan struct{})}
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer close(k.done)
		tick := time.NewTicker(d / 3)
		defer tick.Stop()
		for {
			select {
			case <-k.quit:
				return
			case <-k.valid.Lost():
				return
			case <-s.Done():
				k.valid.Lose()
				return
			case <-tick.C:
			}
			sent := time.Now()
			kctx, cancel := context.WithTimeout(ctx, d/3)
			resp, err := l.cli.KeepAliveOnce(kctx, s.Lease())
			cancel()
			if err == nil {
				k.valid.Extend(lease.ValidUntil(sent, time.Duration(resp.TTL)*time.Second))
			}
		}
	}()
	return k
}

// failed is an acquisition's error: the context's cause when it ended (a
// deadline: the sale answers lock_timeout), else etcd's (no quorum, a
// member unreachable: unavailable).
func (l *Locker) failed(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("lock not obtained (etcd: %s %s): %w", what, l.prefix, context.Cause(ctx))
	}
	return fmt.Errorf("etcd: %s %s: %w", what, l.prefix, err)
}

// createRevision is the holder's key's create revision: its fencing token.
// The lock is held: the caller's context ending now (its acquire deadline)
// does not throw it away; the read has its own bound (RequestTimeout, as
// every KV request of the Locker's client: see bounded).
func (l *Locker) createRevision(ctx context.Context, m *concurrency.Mutex) (int64, error) {
	resp, err := l.cli.Get(context.WithoutCancel(ctx), m.Key())
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 0 {
		return 0, concurrency.ErrSessionExpired
	}
	return resp.Kvs[0].CreateRevision, nil
}

// release deletes the holder's key if it is still the one this hold created
// (its lease may have expired and the key gone): lease.ErrNotHeld otherwise.
func (l *Locker) release(ctx context.Context, m *concurrency.Mutex) error {
	// lesson:begin etcd
	resp, err := l.cli.Txn(ctx).If(m.IsOwner()).Then(clientv3.OpDelete(m.Key())).Commit()
	if err != nil {
		return fmt.Errorf("etcd: release %s: %w", l.prefix, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcd: release %s: %w", l.prefix, lease.ErrNotHeld)
	}
	return nil
	// lesson:end
}

// closeSession stops keeping the session's lease alive and revokes it, best
// effort and within revokeTimeout: if that fails the lease expires by itself
// at its TTL. (Session.Close would wait up to the whole TTL for a cluster
// with no quorum.)
func (l *Locker) closeSession(ctx context.Context, s *concurrency.Session) {
	s.Orphan()
	l.revoke(ctx, s.Lease())
}

func (l *Locker) revoke(ctx context.Context, id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), step.Timeout(ctx, revokeTimeout))
	defer cancel()
	_, _ = l.cli.Revoke(ctx, id)
}

// bounded is a KV whose requests carry RequestTimeout (or their caller's
// deadline, when sooner): those the lock and its mutex send, Get, Delete and
// Txn; the rest pass through.
type bounded struct{ clientv3.KV }

func (b bounded) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, step.Timeout(ctx, RequestTimeout))
	defer cancel()
	return b.KV.Get(ctx, key, opts...)
}

func (b bounded) Delete(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.DeleteResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, step.Timeout(ctx, RequestTimeout))
	defer cancel()
	return b.KV.Delete(ctx, key, opts...)
}

// Txn records the transaction and sends it, bounded, at Commit.
func (b bounded) Txn(ctx context.Context) clientv3.Txn { return &boundedTxn{ctx: ctx, kv: b.KV} }

type boundedTxn struct {
	ctx        context.Context
	kv         clientv3.KV
	cmps       []clientv3.Cmp
	then, elze []clientv3.Op
}

func (t *boundedTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.cmps = cs; return t }
func (t *boundedTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.then = ops; return t }
func (t *boundedTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.elze = ops; return t }

func (t *boundedTxn) Commit() (*clientv3.TxnResponse, error) {
	ctx, cancel := context.WithTimeout(t.ctx, step.Timeout(t.ctx, RequestTimeout))
	defer cancel()
	return t.kv.Txn(ctx).If(t.cmps...).Then(t.then...).Else(t.elze...).Commit()
}
