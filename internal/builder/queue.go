package builder

import (
	"context"
	"time"

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
