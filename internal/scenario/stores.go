package scenario

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Stores reads and frees each lock where it lives (its keys in the stock's
// Redis node, etcd's prefix, ZooKeeper's directory, the database's row) and
// asks etcd's members who leads. It holds the lock services' clients and
// knows the locks' layouts, so it links their drivers and the lock
// packages: the commands pass it in (package internal/scenario/stores, as
// Open), so that this package, and the lab that reads its catalogue, link
// none of them.
type Stores interface {
	// Held reports whether lock is taken: its key exists in Redis, or a key
	// under etcd's prefix (a holder's, or a waiter's behind it), a node in
	// ZooKeeper's directory, a live row or a used GET_LOCK name.
	Held(ctx context.Context, lock string) (bool, error)
	// Clear deletes lock's key and its wait queues, so that what comes next
	// finds the lock free and nobody queued.
	Clear(ctx context.Context, lock string) error
	// LockKeys are lock's keys in the stock's Redis node: the lock key, or
	// rueidislock's keys of it (one per key of its majority).
	LockKeys(lock string) []string
	// WaitKeys are the Redis keys of wait's queue ("notify" or "handoff")
	// and of its count of dead waiters the releasing side passed over.
	WaitKeys(wait string) (queue, passed string)
	// EtcdStatus is the id of the etcd member at addr and of the leader it
	// follows.
	EtcdStatus(ctx context.Context, addr string) (member, leader uint64, err error)
	// Has says whether the stack has service: "zk" (an ensemble) or "db" (a
	// database).
	Has(service string) bool
	// PingDB says whether the database answers.
	PingDB(ctx context.Context) error
	// Close closes the clients it opened (not Services.Redis: the Env's).
	Close() error
}

// Services are what a Stores reaches: the stock's Redis node and the lock's
// key there, etcd's members, ZooKeeper's (none: the stack has no ensemble)
// and the database's address (empty: none) with its password.
type Services struct {
	Redis      *redis.Client
	LockKey    string
	Etcd, ZK   []string
	DBAddr     string
	DBPassword string
}

// Opener opens the Stores of a stack's services.
type Opener func(Services) (Stores, error)

// has says whether the Env's stack has service (its Stores says so).
func (e Env) has(service string) bool { return e.Stores != nil && e.Stores.Has(service) }
