package scenario

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/locks/db"
	"github.com/locklab/locklab/internal/locks/etcd"
	"github.com/locklab/locklab/internal/locks/zk"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// ErrNoFaultHooks is an Env asked of replicas whose /healthz says their
// fault hooks are off: no scenario can act on them.
var ErrNoFaultHooks = errors.New("scenario: the replicas run without -chaos and -admin-token")

// Local is the Env of the local cluster c, whose replicas reported h on
// /healthz: its nginx, its first two replicas, its Redis nodes, their keys and
// lease. The caller closes it (Env.Close).
func Local(c *cluster.Cluster, h api.Health, adminToken string) (Env, error) {
	s := c.State
	if len(s.Replicas) < 2 {
		return Env{}, fmt.Errorf("scenario: the local cluster has %d replica(s); the scenarios need two", len(s.Replicas))
	}
	if h.Settings["chaos"] != "true" {
		return Env{}, fmt.Errorf("%w (make scenarios starts them so)", ErrNoFaultHooks)
	}
	ttl, acquire, err := deadlines(h)
	if err != nil {
		return Env{}, err
	}
	replica := func(i int) Replica {
		return Replica{Name: s.Replicas[i].Name, URL: "http://" + s.Replicas[i].Addr + "/sale"}
	}
	var members []Member
	var addrs []string
	for _, m := range s.Etcd {
		members, addrs = append(members, Member{Name: m.Name, Addr: m.Addr}), append(addrs, m.Addr)
	}
	cli, err := etcd.Dial(addrs)
	if err != nil {
		return Env{}, err
	}
	var spare []string
	var spareRedis []*redis.Client
	for _, n := range s.Redis[1:] {
		spare, spareRedis = append(spare, n.Name), append(spareRedis, redisconn.New(n.Addr, s.RedisPassword))
	}
	env := Env{URL: s.URL, AdminToken: adminToken, Redis: redisconn.New(s.StockNode().Addr, s.RedisPassword), Etcd: cli,
		LockKey: h.LockKey, StockKey: h.StockKey, TTL: ttl, AcquireTimeout: acquire, Client: &http.Client{Timeout: 2 * time.Minute},
		Replicas: [2]Replica{replica(0), replica(1)}, StockNode: s.StockNode().Name, StockAddr: s.StockNode().Addr,
		SpareNodes: spare, SpareRedis: spareRedis, EtcdMembers: members, Procs: c}
	if s.Toxiproxy != nil {
		env.Faults = toxiproxy.NewClient(s.Toxiproxy.Addr)
	}
	if len(s.ZK) > 0 {
		var servers []string
		for _, m := range s.ZK {
			env.ZKMembers, servers = append(env.ZKMembers, Member{Name: m.Name, Addr: m.Addr}), append(servers, m.Addr)
		}
		if env.ZK, err = zk.Dial(servers, zk.SessionOptions{Timeout: 10 * time.Second}); err != nil {
			_ = env.Close() // what it opened before: etcd's and Redis's clients
			return Env{}, err
		}
	}
	if s.DB != nil {
		if env.DB, err = db.Open(s.DSN()); err != nil {
			_ = env.Close()
			return Env{}, err
		}
		env.DBNode = s.DB.Name
	}
	for _, sb := range s.Standbys {
		env.Standbys = append(env.Standbys, Standby{Name: sb.Name, Addr: sb.Addr, Link: s.StandbyLink(sb.Name),
			Redis: redisconn.New(sb.Addr, s.RedisPassword)})
	}
	if len(s.Sentinels) > 0 {
		env.Sentinels, env.SentinelMaster = s.SentinelAddrs(), cluster.SentinelMaster
	}
	return env, nil
}
