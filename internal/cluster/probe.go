package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/redisconn"
)

// listening reports whether something accepts connections at addr. Dialling
// first keeps go-redis from logging every refused dial of a starting node.
func listening(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

func httpOK(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	return res.StatusCode == http.StatusOK
}

// health reads a replica's /healthz: the keys it uses.
func health(ctx context.Context, addr string) (api.Health, error) {
	var h api.Health
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return h, err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return h, err
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("cluster: %s/healthz: %w", addr, err)
	}
	return h, nil
}

// portOf is addr's port.
func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// redisPorts are the ports of the service's default redlock nodes: where the
// cluster starts its Redis.
func redisPorts() []int { return ports(api.DefaultRedlock) }

// etcdPorts are the client ports of the service's default etcd members:
// where the cluster starts its etcd (each member's peer port is the next).
func etcdPorts() []int { return ports(api.DefaultEtcd) }

func ports(list string) []int {
	nodes, err := redisconn.ParseList(list)
	if err != nil {
		panic("cluster: " + list + ": " + err.Error())
	}
	ports := make([]int, len(nodes))
	for i, n := range nodes {
		ports[i] = portOf(n)
	}
	return ports
}
