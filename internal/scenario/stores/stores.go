// Package stores is the scenarios' view of where each lock lives: the keys
// in the stock's Redis node, etcd's prefix, ZooKeeper's directory, the
// database's row. It holds the lock services' clients and reads the locks'
// own layouts (their key helpers), so it links their drivers and the lock
// packages; package scenario takes it as a scenario.Stores, and the
// commands that run scenarios pass Open, so that the lab, which reads the
// scenarios' catalogue, links none of them.
package stores

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/locklab/locklab/internal/cluster"
	dblock "github.com/locklab/locklab/internal/locks/db"
	"github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/locks/handoff"
	"github.com/locklab/locklab/internal/locks/retry"
	"github.com/locklab/locklab/internal/locks/rueidislock"
	zklock "github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/scenario"
)

// Stores is a scenario.Stores on a stack's services.
type Stores struct {
	redis *redis.Client
	key   string
	etcd  *clientv3.Client
	zk    *zklock.Session // nil: the stack has no ensemble
	db    *sql.DB         // nil: the stack has no database
}

// Open dials the services s names (a scenario.Opener). On an error it
// closes what it had opened.
func Open(s scenario.Services) (scenario.Stores, error) {
	st := &Stores{redis: s.Redis, key: s.LockKey}
	var err error
	if st.etcd, err = etcd.Dial(s.Etcd); err != nil {
		return nil, err
	}
	if len(s.ZK) > 0 {
		if st.zk, err = zklock.Dial(s.ZK, zklock.SessionOptions{Timeout: 10 * time.Second}); err != nil {
			return nil, errors.Join(err, st.Close())
		}
	}
	if s.DBAddr != "" {
		dsn := mysql.NewConfig() // the replicas' account: its password is the Redis one
		dsn.User, dsn.Passwd, dsn.Net, dsn.Addr, dsn.DBName = cluster.DBUser, s.DBPassword, "tcp", s.DBAddr, cluster.DBName
		if st.db, err = dblock.Open(dsn.FormatDSN()); err != nil {
			return nil, errors.Join(err, st.Close())
		}
	}
	return st, nil
}

// Close closes the clients Open opened.
func (s *Stores) Close() error {
	var errs []error
	if s.etcd != nil {
		errs = append(errs, s.etcd.Close())
	}
	if s.zk != nil {
		s.zk.Close()
	}
	if s.db != nil {
		errs = append(errs, s.db.Close())
	}
	return errors.Join(errs...)
}

// Has says whether the stack has an ensemble ("zk") or a database ("db").
func (s *Stores) Has(service string) bool {
	switch service {
	case "zk":
		return s.zk != nil
	case "db":
		return s.db != nil
	}
	return false
}

// PingDB says whether the database answers.
func (s *Stores) PingDB(ctx context.Context) error {
	if s.db == nil {
		return errors.New("stores: the stack has no database")
	}
	return s.db.PingContext(ctx)
}

// LockKeys are lock's keys in the stock's Redis node: the lock key, or
// rueidislock's keys of it (one per key of its majority).
func (s *Stores) LockKeys(lock string) []string {
	switch lock {
	case "rueidislock":
		return rueidislock.Keys(s.key, 2)
	case "rueidislock-1":
		return rueidislock.Keys(s.key, 1)
	}
	return []string{s.key}
}

// WaitKeys are the Redis keys of wait's queue and of its count of dead
// waiters passed over (handoff.Keys, retry.QueueKeys and PassedKey).
func (s *Stores) WaitKeys(wait string) (queue, passed string) {
	if wait == "notify" {
		queue, _ = retry.QueueKeys(s.key)
		return queue, retry.PassedKey(s.key)
	}
	h := handoff.For(s.key)
	return h.Queue, h.Passed
}

// EtcdStatus is the id of the etcd member at addr and of its leader.
func (s *Stores) EtcdStatus(ctx context.Context, addr string) (member, leader uint64, err error) {
	st, err := s.etcd.Status(ctx, addr)
	if err != nil {
		return 0, 0, err
	}
	return st.Header.MemberId, st.Leader, nil
}

// Held reports whether lock is taken where it lives.
func (s *Stores) Held(ctx context.Context, lock string) (bool, error) {
	switch lock {
	case "db", "db-seed", "db-getlock":
		if s.db == nil {
			return false, errors.New("stores: no database to watch the " + lock + " lock")
		}
		switch lock {
		case "db-seed":
			return dblock.SeedHeld(ctx, s.db, s.key)
		case "db-getlock":
			return dblock.GetLockHeld(ctx, s.db, s.key)
		}
		return dblock.Held(ctx, s.db, s.key)
	case "zk":
		if s.zk == nil {
			return false, errors.New("stores: no ZooKeeper session to watch the zk lock")
		}
		return zklock.Held(ctx, s.zk, s.key)
	case "etcd": // a key under its prefix: a holder's, or a waiter's behind it
		resp, err := s.etcd.Get(ctx, s.key+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return false, fmt.Errorf("stores: etcd: %w", err)
		}
		return resp.Count > 0, nil
	}
	n, err := s.redis.Exists(ctx, s.LockKeys(lock)...).Result()
	return n > 0, err
}

// Clear deletes lock's keys and the Redis wait queues, and frees it where
// it lives: etcd's keys under its prefix, ZooKeeper's nodes, the database's
// row (its token kept), a seed row, a GET_LOCK holder's connection.
func (s *Stores) Clear(ctx context.Context, lock string) error {
	h := handoff.For(s.key)
	queue, woken := retry.QueueKeys(s.key)
	keys := append(s.LockKeys(lock), h.Queue, h.Deadlines, h.Granted, queue, woken)
	if err := s.redis.Del(ctx, keys...).Err(); err != nil {
		return fmt.Errorf("deleting %s and its queues: %w", s.key, err)
	}
	var err error
	switch {
	case lock == "etcd":
		_, err = s.etcd.Delete(ctx, s.key+"/", clientv3.WithPrefix())
	case lock == "zk" && s.zk != nil:
		err = zklock.Clear(ctx, s.zk, s.key)
	case lock == "db" && s.db != nil: // freed, its token kept
		err = dblock.Clear(ctx, s.db, s.key)
	case lock == "db-seed" && s.db != nil: // a dead holder's row stays for ever
		err = dblock.SeedClear(ctx, s.db, s.key)
	case lock == "db-getlock" && s.db != nil: // its holder's connection killed
		err = dblock.GetLockClear(ctx, s.db, s.key)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", lock, err)
	}
	return nil
}

var _ scenario.Stores = (*Stores)(nil)
