package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// etcd's timing in the local cluster: a heartbeat of 50 ms and an election
// timeout of 500 ms (etcd's defaults are 100 and 1000). A lost leader is
// replaced within about a second, and a lease may be as short as 1 s: etcd
// raises a shorter TTL to 1.5 election timeouts, and the scenarios run with
// -ttl 1s.
const (
	etcdHeartbeatMS = 50
	etcdElectionMS  = 500
)

// planEtcd lays out the etcd members where the service's default -etcd
// points: etcd-1, etcd-2, etcd-3 on their client ports, each peer port the
// next one, data in the run directory (removed by Down).
func planEtcd(dir string) []Proc {
	var peers []string
	for i, port := range etcdPorts() {
		peers = append(peers, fmt.Sprintf("etcd-%d=http://127.0.0.1:%d", i+1, port+1))
	}
	var members []Proc
	for i, port := range etcdPorts() {
		name := "etcd-" + strconv.Itoa(i+1)
		client, peer := "http://127.0.0.1:"+strconv.Itoa(port), "http://127.0.0.1:"+strconv.Itoa(port+1)
		members = append(members, Proc{Name: name, Addr: "127.0.0.1:" + strconv.Itoa(port), Extra: []string{strings.TrimPrefix(peer, "http://")},
			Log: filepath.Join(dir, name+".log"),
			Args: []string{lookPath("etcd"), "--name", name, "--data-dir", etcdData(dir, name),
				"--listen-client-urls", client, "--advertise-client-urls", client,
				"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
				"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new",
				"--initial-cluster-token", "locklab-local",
				"--heartbeat-interval", strconv.Itoa(etcdHeartbeatMS), "--election-timeout", strconv.Itoa(etcdElectionMS),
				"--logger", "zap", "--log-level", "warn"}})
	}
	return members
}

// etcdData is member name's data directory.
func etcdData(dir, name string) string { return filepath.Join(dir, name+".etcd") }

// removeEtcdData removes a member's data directory, only if it is etcd's
// (it holds etcd's "member" directory) or empty: a folder of the user's that
// happens to have the name is left alone, and reported.
func removeEtcdData(path string) error {
	return removeDataDir(path, "an etcd", func(entries []os.DirEntry) bool {
		return len(entries) == 1 && entries[0].Name() == "member" && entries[0].IsDir()
	})
}

// removeDataDir removes a server's data directory when it is empty or ours
// says it is the server's; otherwise it is left alone, and reported (what
// names the server: "an etcd").
func removeDataDir(path, what string, ours func([]os.DirEntry) bool) error {
	entries, err := os.ReadDir(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) == 0 || ours(entries):
		return os.RemoveAll(path)
	}
	return fmt.Errorf("cluster: %s is not %s data directory; left alone (move it, or choose another RUN_DIR)", path, what)
}
