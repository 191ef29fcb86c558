// Package zktest starts a real ZooKeeper ensemble for tests: n members
// (Debian's zookeeper package, on the JVM) on free loopback ports, each with
// its own data directory, stopped when the test ends, started with the local
// cluster's own configuration (cluster.WriteZooKeeper, cluster.ZooKeeperArgs).
// No mock ZooKeeper: sessions, ephemeral nodes and quorum are ZooKeeper's.
package zktest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/cluster"
	"github.com/locklab/locklab/internal/probe"
	"github.com/locklab/locklab/internal/procstate"
	"github.com/locklab/locklab/internal/redistest"
)

// Ensemble is a running ZooKeeper ensemble.
type Ensemble struct {
	Members []*Member
}

// Member is one ZooKeeper process.
type Member struct {
	Name string
	Addr string // its clients' host:port
	args []string
	log  string
	proc procstate.Held
}

// Start starts an n-member ensemble (1: a standalone server) and waits
// until every member serves (a leader elected). It fails the test, saying
// how to install ZooKeeper, when it is missing.
func Start(tb testing.TB, n int) *Ensemble {
	tb.Helper()
	if _, err := os.Stat(cluster.ZooKeeperJar); err != nil {
		tb.Fatalf("%s not found; the tests need a real ZooKeeper: apt-get install zookeeper (Debian/Ubuntu)", cluster.ZooKeeperJar)
	}
	if _, err := exec.LookPath("java"); err != nil {
		tb.Fatal("java not found; ZooKeeper runs on it: apt-get install zookeeper (Debian/Ubuntu) brings it")
	}
	ports := make([]int, n)
	members := make([]cluster.ZKMember, n)
	for i := range n {
		ports[i] = redistest.FreePort(tb)
		members[i] = cluster.ZKMember{Client: ports[i], Quorum: redistest.FreePort(tb), Election: redistest.FreePort(tb)}
	}
	dir := tb.TempDir()
	e := &Ensemble{}
	tb.Cleanup(func() {
		for _, m := range e.Members {
			m.Stop()
		}
	})
	for i := range n {
		name := "zk" + strconv.Itoa(i+1)
		cfg := filepath.Join(dir, name+".cfg")
		if err := cluster.WriteZooKeeper(cfg, filepath.Join(dir, name), i+1, members); err != nil {
			tb.Fatal(err)
		}
		m := &Member{Name: name, Addr: "127.0.0.1:" + strconv.Itoa(ports[i]), args: cluster.ZooKeeperArgs(cfg), log: filepath.Join(dir, name+".log")}
		if err := m.Start(); err != nil {
			tb.Fatal(err)
		}
		e.Members = append(e.Members, m)
	}
	for _, m := range e.Members {
		if err := m.WaitServing(60 * time.Second); err != nil {
			tb.Fatal(err)
		}
	}
	return e
}

// Servers are the members' client addresses.
func (e *Ensemble) Servers() []string {
	var s []string
	for _, m := range e.Members {
		s = append(s, m.Addr)
	}
	return s
}

// Start starts the member (again, with its data, after Stop).
func (m *Member) Start() error {
	logf, err := os.OpenFile(m.log, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(m.args[0], m.args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return m.proc.Start(cmd, "zookeeper "+m.Name, nil)
}

// WaitServing waits until the member serves clients: its srvr says leader,
// follower or standalone (a member without a quorum says it is not serving).
func (m *Member) WaitServing(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if _, err := probe.ZKMode(m.Addr, time.Second); err == nil {
			return nil
		}
		select {
		case <-m.proc.Exited():
			raw, _ := os.ReadFile(m.log)
			return fmt.Errorf("zookeeper %s exited at start:\n%s", m.Name, raw)
		default:
		}
		if time.Now().After(deadline) {
			raw, _ := os.ReadFile(m.log)
			return fmt.Errorf("zookeeper %s did not serve within %s:\n%s", m.Name, limit, raw)
		}
		time.Sleep(20 * time.Millisecond) // polling the observable state: its srvr
	}
}

// Stop kills the member (as a crash would) and waits for it to exit. It is
// safe to call more than once.
func (m *Member) Stop() { m.proc.Stop() }
