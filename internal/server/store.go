package server

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/sale"
	"github.com/redis/go-redis/v9"
)

// LessonLease is the lease of a stepped sale's lock on the service's
// replicas (Config.LessonLease): long enough to read a step or two, short
// enough to watch it run out.
const LessonLease = 10 * time.Second

// StoreKeys are the keys ReadStore reads: the stock, the lock, and the
// lock's fencing counter (its lock package names it: fence.CounterKey; the
// server links no lock).
type StoreKeys struct{ Stock, Lock, Counter string }

// ReadStore reads what the store holds now in one round trip: the stock,
// the lock key (a string's owner or a hash's field, with its PTTL), the
// newest holder fencing has registered at the stock (its single-node
// domain, "redis") and the fencing counter. The lock key is read both as a
// string and as a hash; its TYPE says which answer counts.
func ReadStore(ctx context.Context, rdb redis.Cmdable, k StoreKeys) (api.Store, error) {
	stockKey, lockKey := k.Stock, k.Lock
	out := api.Store{StockKey: stockKey}
	var (
		stock   *redis.StringCmd
		kind    *redis.StatusCmd
		pttl    *redis.DurationCmd
		str     *redis.StringCmd
		hash    *redis.MapStringStringCmd
		holder  *redis.MapStringStringCmd
		counter *redis.StringCmd
	)
	// The pipeline's own error is its first command's: each is checked
	// below, where WRONGTYPE on the lock key's other reading is expected.
	_, _ = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		stock = p.Get(ctx, stockKey)
		kind = p.Type(ctx, lockKey)
		pttl = p.PTTL(ctx, lockKey)
		str = p.Get(ctx, lockKey)
		hash = p.HGetAll(ctx, lockKey)
		holder = p.HGetAll(ctx, sale.FenceKey(stockKey, "redis"))
		counter = p.Get(ctx, k.Counter)
		return nil
	})
	for _, c := range []redis.Cmder{stock, kind, pttl, holder, counter} {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
			return out, err
		}
	}
	if v, err := stock.Result(); err == nil {
		out.Stock = &v
	}
	ttl := pttl.Val().Milliseconds()
	if pttl.Val() < 0 {
		ttl = -1
	}
	switch kind.Val() {
	case "string":
		out.Lock = &api.LockKey{Key: lockKey, Type: "string", Owner: str.Val(), PTTLms: ttl}
	case "hash":
		out.Lock = &api.LockKey{Key: lockKey, Type: "hash", PTTLms: ttl}
		for owner, n := range hash.Val() {
			out.Lock.Owner, out.Lock.Count = owner, n
		}
	case "none":
	default:
		out.Lock = &api.LockKey{Key: lockKey, Type: kind.Val(), PTTLms: ttl}
	}
	if h := holder.Val(); len(h) > 0 {
		out.Fence = &api.FenceHolder{Token: h["token"], Owner: h["owner"]}
	}
	if n, err := counter.Int64(); err == nil {
		out.Counter = n
	}
	return out, nil
}

// store answers what the store holds now (Config.Store): the lab's
// lessons read it live while two stepped sales run. With ?lock=NAME, a
// version whose lock a lock service keeps, its queue too (Config.Queues).
func (h *handlers) store(w http.ResponseWriter, r *http.Request) {
	if h.Store == nil {
		writeError(w, api.CodeNotFound, "reading the store is not served by this replica")
		return
	}
	lock := r.URL.Query().Get("lock")
	if lock != "" && !slices.Contains(h.Names, lock) {
		writeError(w, api.CodeUnknownLock, fmt.Sprintf("unknown lock %q: want one of %s", lock, strings.Join(h.Names, " ")))
		return
	}
	s, err := h.Store(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if lock != "" && h.Queues != nil {
		if s.Queue, err = h.Queues.ReadQueue(r.Context(), lock); err != nil {
			h.fail(w, r, fmt.Errorf("reading %s's lock: %w", lock, err))
			return
		}
		// A node that is down is said in its entry, not failed: that it
		// is down is what the page shows.
		if s.Nodes, err = h.Queues.ReadNodes(r.Context(), lock); err != nil {
			h.fail(w, r, fmt.Errorf("reading %s's nodes: %w", lock, err))
			return
		}
	}
	writeJSON(w, http.StatusOK, s)
}

// QueueReader reads the lock a lock service keeps (etcd, ZooKeeper,
// MariaDB): its holder, then its waiters in order, for GET
// /store?lock=NAME; nil, nil for a version whose lock is a Redis key; and
// the key on each of Redlock's nodes. It is
// built where the locks are (builder.Queues): the server links none.
type QueueReader interface {
	ReadQueue(ctx context.Context, lock string) (*api.Queue, error)
	// ReadNodes reads the lock key on each node of a lock kept on several
	// (Redlock); nil, nil for any other.
	ReadNodes(ctx context.Context, lock string) ([]api.NodeKey, error)
}

//go:embed forget.lua
var forgetSrc string

var forgetScript = redis.NewScript(forgetSrc)

// ForgetLock removes the lock a crashed stepped sale left under key (the
// lab's lessons: Config.Forget), if it still holds owner: a string holding
// it, or a hash with it as its field. Compare-and-delete in one script:
// another owner's lock, taken since, is never touched. It answers the
// script's reply, "1" (deleted) or "0" (gone, or another's).
func ForgetLock(ctx context.Context, rdb redis.Scripter, key, owner string) (string, error) {
	n, err := forgetScript.Run(ctx, rdb, []string{key}, owner).Int64()
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(n, 10), nil
}
