package scenario

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/redisconn"
)

// Local is the Env of the local cluster c, whose replicas reported h on
// /healthz: its nginx, its first two replicas, its Redis nodes, their keys and
// lease. The caller closes Env.Redis.
func Local(c *cluster.Cluster, h api.Health, adminToken string) (Env, error) {
	s := c.State
	if len(s.Replicas) < 2 {
		return Env{}, fmt.Errorf("scenario: the local cluster has %d replica(s); the scenarios need two", len(s.Replicas))
	}
	if h.Settings["chaos"] != "true" {
		return Env{}, errors.New("scenario: the replicas run without -chaos and -admin-token (make scenarios starts them so)")
	}
	ttl, err := time.ParseDuration(h.Settings["ttl"])
	if err != nil {
		return Env{}, fmt.Errorf("scenario: the replicas report no -ttl: %w", err)
	}
	replica := func(i int) Replica {
		return Replica{Name: s.Replicas[i].Name, URL: "http://" + s.Replicas[i].Addr + "/sale"}
	}
	return Env{URL: s.URL, AdminToken: adminToken, Redis: redisconn.New(s.StockNode().Addr, s.RedisPassword),
		LockKey: h.LockKey, StockKey: h.StockKey, TTL: ttl, Client: &http.Client{Timeout: 2 * time.Minute},
		Replicas: [2]Replica{replica(0), replica(1)}, StockNode: s.StockNode().Name, SpareNode: s.SpareNode().Name, Procs: c}, nil
}
