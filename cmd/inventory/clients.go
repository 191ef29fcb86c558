package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	_ "net/http/pprof" // served only with -pprof, on its own listener
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/builder"
	dblock "github.com/locklab/locklab/internal/locks/db"
	"github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// newRedis is the client of the stock's node: -redis, or (-sentinel) the
// primary the sentinels name, followed through a failover.
func (c config) newRedis() *redis.Client {
	if len(c.Sentinel) > 0 {
		return redisconn.NewFailover(c.SentinelMaster, c.Sentinel, c.RedisPassword)
	}
	return redisconn.New(c.Redis, c.RedisPassword)
}

// redisLogger sends go-redis's own messages (failed dials, pool trouble) to
// slog at debug: each failure they describe already reaches the caller as an
// error, which is logged at warn where it is handled.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, fmt.Sprintf(format, v...), "source", "go-redis")
}

// zkMaxSession is the longest session the ensembles here grant (their
// maxSessionTimeout): the zk lock counts the timeout it asked for, so it
// never asks for more.
const zkMaxSession = 60 * time.Second

// dialZK is the zk lock's session on members (nil for none), of -ttl (at
// most zkMaxSession): in the background, as the etcd client, so a replica
// whose ensemble is down serves every other version.
func dialZK(members []string, ttl time.Duration, log *slog.Logger) (*zk.Session, error) {
	if len(members) == 0 {
		return nil, nil
	}
	return zk.Dial(members, zk.SessionOptions{Timeout: min(ttl, zkMaxSession), Log: log.With("lock", "zk")})
}

// openDB is the database locks' pools of connections to dsn (nil for
// none): the polling locks' (db, db-seed), and db-getlock's, which holds a
// connection for each hold and waits in the server (dblock.OpenHolds).
// Lazy, as the etcd client is, so a replica whose database is down serves
// every other version and the db locks answer 503. The driver's own log
// lines go to log.
func openDB(dsn string, log *slog.Logger) (polls, holds *sql.DB, err error) {
	if dsn == "" {
		return nil, nil, nil
	}
	_ = mysql.SetLogger(driverLog{log})
	if polls, err = dblock.Open(dsn); err != nil {
		return nil, nil, fmt.Errorf("-db: %w", err)
	}
	if holds, err = dblock.OpenHolds(dsn); err != nil {
		polls.Close()
		return nil, nil, fmt.Errorf("-db: %w", err)
	}
	return polls, holds, nil
}

// driverLog puts the MariaDB driver's log lines in the service's log.
type driverLog struct{ log *slog.Logger }

func (d driverLog) Print(v ...any) { d.log.Warn("mariadb driver", "msg", fmt.Sprint(v...)) }

// holders read the lock of the versions whose lock is not the Redis lock
// key, each in its own store, for GET /store?lock=NAME (the lab's lessons
// of the etcd, ZooKeeper and database families): those this replica has a
// client of.
func holders(deps builder.Deps) map[string]func(context.Context) (*api.LockKey, error) {
	out := map[string]func(context.Context) (*api.LockKey, error){}
	if deps.Etcd != nil {
		l := etcd.New(deps.Etcd, etcd.Options{Key: deps.LockKey})
		out["etcd"] = func(ctx context.Context) (*api.LockKey, error) {
			key, left, ok, err := l.Holder(ctx)
			if !ok || err != nil {
				return nil, err
			}
			return &api.LockKey{Key: l.Prefix(), Type: "etcd", Owner: key, PTTLms: left.Milliseconds()}, nil
		}
	}
	if deps.ZK != nil {
		l := zk.New(deps.ZK, zk.Options{Key: deps.LockKey})
		out["zk"] = func(context.Context) (*api.LockKey, error) {
			node, owner, ok, err := l.Holder()
			if !ok || err != nil {
				return nil, err
			}
			return &api.LockKey{Key: l.Dir() + "/" + node, Type: "zk", Owner: owner, PTTLms: -1}, nil
		}
	}
	if deps.DB != nil {
		out["db-getlock"] = func(ctx context.Context) (*api.LockKey, error) {
			conn, ok, err := dblock.GetLockHolder(ctx, deps.DB, deps.LockKey)
			if !ok || err != nil {
				return nil, err
			}
			return &api.LockKey{Key: dblock.GetLockName(deps.LockKey), Type: "db-getlock", Owner: conn, PTTLms: -1}, nil
		}
	}
	return out
}
