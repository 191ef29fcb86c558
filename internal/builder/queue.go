package builder

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locklab/locklab/internal/api"
	dblock "github.com/locklab/locklab/internal/locks/db"
	etcdlock "github.com/locklab/locklab/internal/locks/etcd"
	zklock "github.com/locklab/locklab/internal/locks/zk"
)

// Queues reads the lock of the versions a lock service keeps (etcd,
// ZooKeeper, MariaDB) from the clients the versions are built from, for
// the server's GET /store?lock=NAME (server.Config.Queues): the server
// links no lock and no driver, so the reading is built here.
type Queues struct{ d Deps }

// NewQueues reads the locks d's clients hold, under d's lock key.
func NewQueues(d Deps) Queues { return Queues{d.withDefaults()} }

// QueueTimeout bounds one read of a queue: a lock service that does not
// answer (no quorum, no member up, the database gone) is a 503 the page
// shows, not a request left waiting.
const QueueTimeout = 5 * time.Second

// ReadQueue reads lock's holder and waiters; nil, nil for a version whose
// lock is not a lock service's (the Redis locks: /store reads their key).
// A version whose service is not configured answers its error (ErrNoEtcd,
// ErrNoZK, ErrNoDB), as its sales do.
func (q Queues) ReadQueue(ctx context.Context, lock string) (*api.Queue, error) {
	d := q.d
	var where string
	var read func(context.Context) ([]api.QueueEntry, error)
	switch lock {
	case "etcd":
		if d.Etcd == nil {
			return nil, ErrNoEtcd
		}
		l := etcdlock.New(d.Etcd, etcdlock.Options{Key: d.LockKey})
		where, read = l.Prefix(), l.Queue
	case "zk":
		if d.ZK == nil {
			return nil, ErrNoZK
		}
		l := zklock.New(d.ZK, zklock.Options{Key: d.LockKey})
		where, read = l.Dir(), l.Queue
	case "db", "db-seed":
		if d.DB == nil {
			return nil, ErrNoDB
		}
		rows := map[string]func(context.Context, dblock.Querier, string) ([]api.QueueEntry, error){"db": dblock.RowQueue, "db-seed": dblock.SeedQueue}[lock]
		where = d.LockKey
		read = func(ctx context.Context) ([]api.QueueEntry, error) { return rows(ctx, d.DB, d.LockKey) }
	case "db-getlock":
		if d.DBHolds == nil {
			return nil, ErrNoDB
		}
		where = dblock.GetLockName(d.LockKey)
		read = func(ctx context.Context) ([]api.QueueEntry, error) {
			return dblock.GetLockQueue(ctx, d.DBHolds, d.LockKey)
		}
	default:
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, QueueTimeout)
	defer cancel()
	entries, err := read(ctx)
	if err != nil {
		return nil, err
	}
	if entries == nil {
		entries = []api.QueueEntry{} // nobody: [] to the page, not null
	}
	return &api.Queue{Lock: lock, Where: where, Entries: entries}, nil
}

// NodeTimeout bounds the reading of one Redlock node: a node that is down
// refuses at once, one frozen must not hold the page's reading.
const NodeTimeout = time.Second

// ReadNodes reads the lock key on each of the nodes lock is kept on
// (Redlock's, named by Deps.RedlockNames), all at once: its holder and
// PTTL, nobody's, or why the node did not answer; nil, nil for a version
// kept on one node or in a lock service.
func (q Queues) ReadNodes(ctx context.Context, lock string) ([]api.NodeKey, error) {
	d := q.d
	if lock != "redlock" || len(d.Redlock) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, NodeTimeout)
	defer cancel()
	out := make([]api.NodeKey, len(d.Redlock))
	var wg sync.WaitGroup
	for i, c := range d.Redlock {
		name := fmt.Sprintf("node %d", i+1)
		if i < len(d.RedlockNames) {
			name = d.RedlockNames[i]
		}
		wg.Go(func() {
			out[i] = api.NodeKey{Node: name}
			var owner *redis.StringCmd
			var pttl *redis.DurationCmd
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
				owner, pttl = p.Get(ctx, d.LockKey), p.PTTL(ctx, d.LockKey)
				return nil
			})
			switch {
			case errors.Is(err, redis.Nil):
			case err != nil:
				out[i].Down = err.Error()
				return
			}
			if v, err := owner.Result(); err == nil {
				ttl := pttl.Val().Milliseconds()
				if pttl.Val() < 0 {
					ttl = -1
				}
				out[i].Lock = &api.LockKey{Key: d.LockKey, Type: "string", Owner: v, PTTLms: ttl}
			}
		})
	}
	wg.Wait()
	return out, nil
}
