package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/locklab/locklab/internal/api"
)

// The zk lock's ZooKeeper ensemble in the local cluster: three members,
// zookeeper-1..3, on the client ports of api.DefaultZK, each with its quorum
// port and its election port the next two; data in the run directory, fresh
// each up (as etcd's). Debian's zookeeper package: its jar and the JVM.
//
// Timing: a tick of 500 ms (ZooKeeper's default is 2 s), so a session may be
// as short as 1 s (two ticks: the scenarios run with -ttl 1s) and as long as
// 60 s, and a member that lost its leader follows a new one within seconds.
const zkTickMS = 500

// ZKMember is one ensemble member's ports: its clients', and the quorum and
// election ports the members talk to each other on.
type ZKMember struct{ Client, Quorum, Election int }

// ZKMembers are members whose client ports are ports, each with its quorum
// and election ports the next two (the local cluster's layout).
func ZKMembers(ports []int) []ZKMember {
	ms := make([]ZKMember, len(ports))
	for i, p := range ports {
		ms[i] = ZKMember{Client: p, Quorum: p + 1, Election: p + 2}
	}
	return ms
}

// ZooKeeperJar is Debian's ZooKeeper server (its manifest names the jars it
// needs); ZooKeeperLog is slf4j's simple logger, so the member's warnings
// reach its log (the jar alone logs nothing).
const (
	ZooKeeperJar = "/usr/share/java/zookeeper.jar"
	zooKeeperLog = "/usr/share/java/slf4j-simple.jar"
)

// ZooKeeperArgs are the command line of the member whose configuration is
// the file cfg: a small JVM (a 64 MB heap, the serial collector, no
// optimizing compiler: an ensemble of three fits in about 200 MB) running
// ZooKeeper's quorum peer. The tests' members (package zktest) start the
// same way.
func ZooKeeperArgs(cfg string) []string {
	return []string{lookPath("java"), "-Xms16m", "-Xmx64m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dzookeeper.admin.enableServer=false",
		"-cp", ZooKeeperJar + ":" + zooKeeperLog, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg}
}

// WriteZooKeeper writes member id's (1-based, of members) configuration
// file, cfg, and its data directory, data, with the id in it: loopback
// only, the four-letter words the health checks read, the lenient session
// bounds above. One member alone is a standalone server.
func WriteZooKeeper(cfg, data string, id int, members []ZKMember) error {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(id)+"\n"), 0o600); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=%d\ninitLimit=20\nsyncLimit=10\n", zkTickMS)
	fmt.Fprintf(&b, "dataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n", data, members[id-1].Client)
	fmt.Fprintf(&b, "minSessionTimeout=%d\nmaxSessionTimeout=60000\n", 2*zkTickMS)
	b.WriteString("4lw.commands.whitelist=ruok,srvr,mntr\nadmin.enableServer=false\nautopurge.purgeInterval=0\n")
	if len(members) > 1 {
		for i, m := range members {
			fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", i+1, m.Quorum, m.Election)
		}
	}
	return os.WriteFile(cfg, []byte(b.String()), 0o600)
}

// planZK lays out the ensemble where the service's default -zk points.
func planZK(dir string) []Proc {
	members := ZKMembers(zkPorts())
	var ps []Proc
	for i, m := range members {
		name := "zookeeper-" + strconv.Itoa(i+1)
		ps = append(ps, Proc{Name: name, Addr: "127.0.0.1:" + strconv.Itoa(m.Client), Log: filepath.Join(dir, name+".log"),
			Extra: []string{"127.0.0.1:" + strconv.Itoa(m.Quorum), "127.0.0.1:" + strconv.Itoa(m.Election)},
			Args:  ZooKeeperArgs(zkConfig(dir, name))})
	}
	return ps
}

// writeZK writes every member's configuration and fresh data directory.
func writeZK(dir string, ps []Proc) error {
	members := ZKMembers(zkPorts())
	for i, p := range ps {
		if err := removeZKData(zkData(dir, p.Name)); err != nil {
			return err
		}
		if err := WriteZooKeeper(zkConfig(dir, p.Name), zkData(dir, p.Name), i+1, members); err != nil {
			return err
		}
	}
	return nil
}

func zkConfig(dir, name string) string { return filepath.Join(dir, name+".cfg") }
func zkData(dir, name string) string   { return filepath.Join(dir, name+".data") }

// zkPorts are the client ports of the service's default ZooKeeper members.
func zkPorts() []int { return ports(api.DefaultZK) }

// removeZKData removes a member's data directory, only if it is
// ZooKeeper's (its myid, its version-2 folder) or empty.
func removeZKData(path string) error {
	return removeDataDir(path, "a ZooKeeper", func(entries []os.DirEntry) bool {
		for _, e := range entries {
			if e.Name() != "myid" && e.Name() != "version-2" {
				return false
			}
		}
		return true
	})
}

// removeFile removes path; a file already gone is no error.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
