package cluster

import (
	"encoding/json"
	"path/filepath"
	"strconv"

	"github.com/locklab/locklab/internal/probe"
)

// The fault proxies (Config.Faults): a toxiproxy server (Shopify's, built
// from the module's tool dependency) with one proxy per replica and Redis
// node, so that a scenario can cut, stall or delay what one replica says to
// one node while the other replica reaches it as before: network faults
// without Docker. Each proxy is named REPLICA>NODE and listens on
// faultPortBase + 100*replica + (node port - 6380): inventory-1's way to
// redis-6381 is 127.0.0.1:16101.
const (
	faultAPIPort  = 8474 // toxiproxy's own default
	faultPortBase = 16000
)

// FaultProxy is one proxy: who it carries, where it listens, where it leads.
type FaultProxy struct {
	Name     string `json:"name"`
	Listen   string `json:"listen"`
	Upstream string `json:"upstream"`
	Enabled  bool   `json:"enabled"`
}

// planFaults lays out the toxiproxy server and its proxies (the replicas'
// addresses of the nodes become the proxies'); planStandbys adds the
// standbys' own.
func planFaults(dir string, s *State, replicas []string) {
	s.Toxiproxy = &Proc{Name: "toxiproxy", Addr: "127.0.0.1:" + strconv.Itoa(faultAPIPort), Log: filepath.Join(dir, "toxiproxy.log"),
		Args: []string{filepath.Join(dir, "bin", "toxiproxy"), "-host", "127.0.0.1", "-port", strconv.Itoa(faultAPIPort),
			"-config", faultConfig(dir)}}
	for i, r := range replicas {
		for _, n := range s.Redis {
			s.FaultProxies = append(s.FaultProxies, FaultProxy{Name: probe.FaultProxyName(r, n.Name),
				Listen: "127.0.0.1:" + strconv.Itoa(faultPortBase+100*(i+1)+portOf(n.Addr)-6380), Upstream: n.Addr, Enabled: true})
		}
	}
	planClock(dir, s)
}

// planStandbys lays out n asynchronous replicas of the stock's node, the
// standbys, on the ports after the last node's: what the failover scenarios
// promote (by hand, or Sentinel). With the fault proxies each replicates
// through a proxy of its own, so a scenario can stall its replication link
// (what it already received a frozen replica would still apply on waking: a
// cut drops it on the way).
func planStandbys(dir string, s *State, n int, auth bool) {
	stock := s.Redis[0]
	for i := range n {
		port := portOf(s.Redis[len(s.Redis)-1].Addr) + 1 + i
		name, from := "redis-"+strconv.Itoa(port), stock.Addr
		if s.Toxiproxy != nil {
			link := FaultProxy{Name: probe.FaultProxyName(name, stock.Name), Listen: "127.0.0.1:" + strconv.Itoa(faultPortBase+port-6300),
				Upstream: stock.Addr, Enabled: true}
			s.FaultProxies, from = append(s.FaultProxies, link), link.Listen
		}
		args := append(redisArgs(stock.Args[0], port, dir, auth), "--replicaof", "127.0.0.1", strconv.Itoa(portOf(from)))
		s.Standbys = append(s.Standbys, Proc{Name: name, Addr: "127.0.0.1:" + strconv.Itoa(port), Log: filepath.Join(dir, name+".log"), Args: args})
	}
	if s.Toxiproxy != nil {
		s.Toxiproxy.Extra = nil
		for _, p := range s.FaultProxies {
			s.Toxiproxy.Extra = append(s.Toxiproxy.Extra, p.Listen)
		}
	}
}

// StandbyLink is the address the standby called name replicates from: its
// fault proxy's, or "" with no proxies.
func (s *State) StandbyLink(name string) string {
	for _, p := range s.FaultProxies {
		if p.Name == probe.FaultProxyName(name, s.StockNode().Name) {
			return p.Listen
		}
	}
	return ""
}

// nodeAddrs is where replica reaches each Redis node: through its own
// proxies when the cluster has them.
func (s *State) nodeAddrs(replica string) []string {
	var addrs []string
	for _, n := range s.Redis {
		addr := n.Addr
		for _, p := range s.FaultProxies {
			if p.Name == probe.FaultProxyName(replica, n.Name) {
				addr = p.Listen
			}
		}
		addrs = append(addrs, addr)
	}
	return addrs
}

// faultConfig is the file toxiproxy creates its proxies from at start.
func faultConfig(dir string) string { return filepath.Join(dir, "toxiproxy.json") }

func writeFaultConfig(dir string, proxies []FaultProxy) error {
	raw, err := json.MarshalIndent(proxies, "", "  ")
	if err != nil {
		return err
	}
	return writePrivate(faultConfig(dir), append(raw, '\n'))
}
