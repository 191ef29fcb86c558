// Package etcdtest starts a real etcd cluster for tests: n etcd processes
// (Debian's etcd-server) on free loopback ports, each with its own data
// directory, stopped when the test ends. No mock etcd: the lock's behaviour
// is etcd's, quorum and leases included.
package etcdtest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/procstate"
	"github.com/locklab/locklab/internal/redistest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Cluster is a running etcd cluster.
type Cluster struct {
	Members []*Member
	tb      testing.TB
}

// Member is one etcd process.
type Member struct {
	Name      string
	ClientURL string
	args      []string
	proc      procstate.Held
}

// Timing: a heartbeat of 50 ms and an election timeout of 500 ms, so a lost
// leader is replaced in about a second, and leases may be as short as etcd
// then allows (1.5 election timeouts).
const (
	heartbeatMS = 50
	electionMS  = 500
)

// Start starts an n-member cluster and waits until every member answers with
// a leader elected. It fails the test, saying how to install etcd, when the
// binary is missing.
func Start(tb testing.TB, n int) *Cluster {
	tb.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		tb.Fatal("etcd not found in PATH; the tests need a real etcd: apt-get install etcd-server (Debian/Ubuntu)")
	}
	c := &Cluster{tb: tb}
	var peers []string
	type ports struct{ client, peer int }
	var ps []ports
	for i := range n {
		p := ports{redistest.FreePort(tb), redistest.FreePort(tb)}
		ps = append(ps, p)
		peers = append(peers, fmt.Sprintf("m%d=http://127.0.0.1:%d", i+1, p.peer))
	}
	dir := tb.TempDir()
	for i, p := range ps {
		name := "m" + strconv.Itoa(i+1)
		client, peer := "http://127.0.0.1:"+strconv.Itoa(p.client), "http://127.0.0.1:"+strconv.Itoa(p.peer)
		m := &Member{Name: name, ClientURL: client, args: []string{
			"--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(peers, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "locklab-test",
			"--heartbeat-interval", strconv.Itoa(heartbeatMS), "--election-timeout", strconv.Itoa(electionMS),
			"--logger", "zap", "--log-level", "error",
		}}
		if err := m.start(); err != nil {
			tb.Fatal(err)
		}
		c.Members = append(c.Members, m)
	}
	tb.Cleanup(func() {
		for _, m := range c.Members {
			m.Stop()
		}
	})
	for _, m := range c.Members {
		if err := m.waitHealthy(30 * time.Second); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Client returns a client of every member, closed when the test ends.
func (c *Cluster) Client() *clientv3.Client {
	c.tb.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.tb.Fatal(err)
	}
	c.tb.Cleanup(func() { cli.Close() })
	return cli
}

func (m *Member) start() error {
	return m.proc.Start(exec.Command("etcd", m.args...), "etcd "+m.Name, nil)
}

// waitHealthy waits until the member answers a status request with a leader.
func (m *Member) waitHealthy(limit time.Duration) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cli.Status(ctx, m.ClientURL)
		cancel()
		if err == nil && st.Leader != 0 {
			return nil
		}
		select {
		case <-m.proc.Exited():
			return fmt.Errorf("etcd %s exited at start (port taken?)", m.Name)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcd %s had no leader within %s: %v", m.Name, limit, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the observable state: its status
	}
}

// WaitLeader waits until every running member names the same leader and
// that leader is one of them: after a member is killed, a follower still
// forwards proposals to the dead leader until its election timeout, and a
// request sent then waits out its deadline (etcd is unavailable during an
// election; the tests that say the lock works with a member down mean once
// the survivors have elected one).
func (c *Cluster) WaitLeader(limit time.Duration) {
	c.tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		leader, err := c.leader()
		if err == nil && leader != 0 {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("etcd: the running members agreed on no running leader within %s: %v", limit, err)
		}
		time.Sleep(10 * time.Millisecond) // polling the observable state: the members' status
	}
}

// leader is the leader every running member names, 0 when they disagree or
// it is not one of them.
func (c *Cluster) leader() (uint64, error) {
	ids, leaders := map[uint64]bool{}, map[uint64]bool{}
	for _, m := range c.Members {
		if !m.proc.Running() {
			continue
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			return 0, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cli.Status(ctx, m.ClientURL)
		cancel()
		cli.Close()
		if err != nil {
			return 0, fmt.Errorf("status of %s: %w", m.Name, err)
		}
		ids[st.Header.MemberId] = true
		leaders[st.Leader] = true
	}
	if len(leaders) != 1 {
		return 0, fmt.Errorf("the members name %d leaders", len(leaders))
	}
	for l := range leaders {
		if ids[l] {
			return l, nil
		}
	}
	return 0, fmt.Errorf("the leader they name is not running")
}

// Stop kills the member (as a crash would) and waits for it to exit. It is
// safe to call more than once.
func (m *Member) Stop() { m.proc.Stop() }

// Freeze stops every member with SIGSTOP (their ports still accept
// connections, they answer nothing: the cluster cut off, as its clients see
// it) or, with frozen false, resumes them. A frozen member is resumed when
// the test ends.
func (c *Cluster) Freeze(frozen bool) {
	c.tb.Helper()
	for _, m := range c.Members {
		// A stopped member is passed over: it answers nothing either way.
		if _, err := m.proc.Freeze(frozen, c.tb.Cleanup); err != nil {
			c.tb.Fatal(err)
		}
	}
}

// BeforeGet makes cli run do, once, just before it sends the first read of
// a key that match accepts: a fault injected at one exact step of a real
// client's work (the etcd lock's read of its token, right after the lock).
// Call it before cli is handed to the code under test.
func BeforeGet(cli *clientv3.Client, match func(key string) bool, do func()) {
	cli.KV = &beforeGet{KV: cli.KV, match: match, do: do}
}

type beforeGet struct {
	clientv3.KV
	match func(string) bool
	do    func()
	once  sync.Once
}

func (b *beforeGet) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if b.match(key) {
		b.once.Do(b.do)
	}
	return b.KV.Get(ctx, key, opts...)
}
