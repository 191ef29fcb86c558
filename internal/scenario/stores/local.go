package stores

import (
	"errors"
	"fmt"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/locklab/locklab/internal/scenario"
)

// Local is the Env of the local cluster c, whose replicas reported h on
// /healthz: its nginx, its first two replicas, its Redis nodes, their keys and
// lease. The caller closes it (Env.Close).
func Local(c *cluster.Cluster, h api.Health, adminToken string) (scenario.Env, error) {
	s := c.State
	if len(s.Replicas) < 2 {
		return scenario.Env{}, fmt.Errorf("scenario: the local cluster has %d replica(s); the scenarios need two", len(s.Replicas))
	}
	if h.Settings["chaos"] != "true" {
		return scenario.Env{}, fmt.Errorf("%w (make scenarios starts them so)", scenario.ErrNoFaultHooks)
	}
	env, err := scenario.NewEnv(h, adminToken)
	if err != nil {
		return scenario.Env{}, err
	}
	replica := func(i int) scenario.Replica {
		return scenario.Replica{Name: s.Replicas[i].Name, URL: "http://" + s.Replicas[i].Addr + "/sale"}
	}
	services := scenario.Services{LockKey: h.LockKey}
	for _, m := range s.Etcd {
		env.EtcdMembers, services.Etcd = append(env.EtcdMembers, scenario.Member{Name: m.Name, Addr: m.Addr}), append(services.Etcd, m.Addr)
	}
	for _, m := range s.ZK {
		env.ZKMembers, services.ZK = append(env.ZKMembers, scenario.Member{Name: m.Name, Addr: m.Addr}), append(services.ZK, m.Addr)
	}
	if s.DB != nil {
		env.DBNode, services.DBAddr, services.DBPassword = s.DB.Name, s.DB.Addr, s.RedisPassword
	}
	env.URL, env.Procs = s.URL, c
	env.Replicas = [2]scenario.Replica{replica(0), replica(1)}
	env.Redis, env.StockNode, env.StockAddr = redisconn.New(s.StockNode().Addr, s.RedisPassword), s.StockNode().Name, s.StockNode().Addr
	for _, n := range s.Redis[1:] {
		env.SpareNodes, env.SpareRedis = append(env.SpareNodes, n.Name), append(env.SpareRedis, redisconn.New(n.Addr, s.RedisPassword))
	}
	if s.Toxiproxy != nil {
		env.Faults = toxiproxy.NewClient(s.Toxiproxy.Addr)
	}
	for _, sb := range s.Standbys {
		env.Standbys = append(env.Standbys, scenario.Standby{Name: sb.Name, Addr: sb.Addr, Link: s.StandbyLink(sb.Name),
			Redis: redisconn.New(sb.Addr, s.RedisPassword)})
	}
	if len(s.Sentinels) > 0 {
		env.Sentinels, env.SentinelMaster = s.SentinelAddrs(), cluster.SentinelMaster
	}
	services.Redis = env.Redis
	if env.Stores, err = Open(services); err != nil {
		return scenario.Env{}, errors.Join(err, env.Close()) // what it opened before: the Redis clients
	}
	return env, nil
}
