package cluster

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/client"
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

// httpOK reports whether url answers 200 within 2 s: etcd's /health and
// toxiproxy's /version, which are not the service (replicas answers for it).
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

// service is the client of the service at addr (a replica, or nginx):
// its health and readiness.
var service = client.New("", "")

// answers reports whether the service at addr answers within 2 s: ready
// (/readyz: its stock's Redis answers), or, not ready, up (/healthz, which
// nginx passes to a replica).
func answers(ctx context.Context, addr string, ready bool) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	svc := service.At("http://" + addr)
	if ready {
		return svc.Ready(ctx) == nil
	}
	_, err := svc.Health(ctx)
	return err == nil
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
