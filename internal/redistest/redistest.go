// Package redistest starts real redis-server processes for tests, each on a
// free port, and stops them when the test ends. No mock Redis: the locks'
// behaviour is Redis's behaviour.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/procstate"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// Server is one running redis-server.
type Server struct {
	Addr string
	port int
	dir  string // its working directory: a replica's full sync writes an RDB file there
	tb   testing.TB
	// sentinel, for a Redis Sentinel, is its configuration but the port:
	// what it monitors, and how fast it fails over.
	sentinel string

	proc procstate.Held
}

// Start starts a redis-server with no persistence on a free loopback port and
// waits until it answers PING. It fails the test, saying how to install
// redis-server, when the binary is missing.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return launch(tb, &Server{tb: tb, dir: tb.TempDir()})
}

// StartSentinel starts a Redis Sentinel (redis-server --sentinel) on a free
// port that monitors primary under the name master with a quorum of 2 of
// three sentinels, takes a primary that does not answer for 500 ms as down,
// and so fails over within about a second once two sentinels agree.
func StartSentinel(tb testing.TB, primary *Server, master string) *Server {
	tb.Helper()
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\nsentinel down-after-milliseconds %[1]s 500\n"+
		"sentinel failover-timeout %[1]s 5000\nsentinel parallel-syncs %[1]s 1\n", master, primary.port)
	return launch(tb, &Server{tb: tb, dir: tb.TempDir(), sentinel: conf})
}

// StartSentinels starts three sentinels of primary (StartSentinel) and waits
// until each has found the primary's replicas (as many as it has now) and
// the two other sentinels: what a failover needs. It returns their
// addresses.
func StartSentinels(tb testing.TB, primary *Server, master string, replicas int) []string {
	tb.Helper()
	var addrs []string
	var clients []*redis.SentinelClient
	for range 3 {
		s := StartSentinel(tb, primary, master)
		c := redis.NewSentinelClient(redisconn.Options(s.Addr, ""))
		tb.Cleanup(func() { c.Close() })
		addrs, clients = append(addrs, s.Addr), append(clients, c)
	}
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); ; {
		found := 0
		for _, c := range clients {
			reps, err1 := c.Replicas(ctx, master).Result()
			peers, err2 := c.Sentinels(ctx, master).Result()
			if err1 == nil && err2 == nil && len(reps) == replicas && len(peers) == 2 {
				found++
			}
		}
		if found == len(clients) {
			return addrs
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the sentinels of %s did not find its %d replicas and each other within 30 s", primary.Addr, replicas)
		}
		time.Sleep(20 * time.Millisecond) // polling the observable state
	}
}

// WaitPromoted waits until the sentinel at sentinel names want as master's
// primary (a failover done).
func WaitPromoted(tb testing.TB, sentinel, master string, want *Server) {
	tb.Helper()
	c := redis.NewSentinelClient(redisconn.Options(sentinel, ""))
	defer c.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		addr, err := c.GetMasterAddrByName(context.Background(), master).Result()
		if err == nil && len(addr) == 2 && net.JoinHostPort(addr[0], addr[1]) == want.Addr {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("Sentinel did not promote %s within 30 s: it names %v (%v)", want.Addr, addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the observable state
	}
}

// launch starts s on a free port and stops it when the test ends.
func launch(tb testing.TB, s *Server) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Fatal("redis-server not found in PATH; the tests need a real Redis: apt-get install redis-server (Debian/Ubuntu) or brew install redis")
	}
	var err error
	for range 5 { // a free port can be taken between choosing and binding it
		if s.port, err = freePort(); err != nil {
			tb.Fatal(err)
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// StartReplica starts a redis-server that replicates primary
// (asynchronously, as Redis does) and waits until its link is up.
func StartReplica(tb testing.TB, primary *Server) *Server {
	tb.Helper()
	r := Start(tb)
	ctx := context.Background()
	if err := r.Client().ReplicaOf(ctx, "127.0.0.1", strconv.Itoa(primary.port)).Err(); err != nil {
		tb.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := r.Client().Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("the replica of %s never linked up: %v", primary.Addr, err)
		}
		time.Sleep(5 * time.Millisecond) // polling the observable state
	}
}

// Client returns a client for s with the service's options, closed when the
// test ends.
func (s *Server) Client() *redis.Client {
	c := redisconn.New(s.Addr, "")
	s.tb.Cleanup(func() { c.Close() })
	return c
}

// Stop kills the server (as a crash would) and waits for it to exit. It is
// safe to call more than once.
func (s *Server) Stop() { s.proc.Stop() }

// Freeze stops the server with SIGSTOP (its port still accepts
// connections, it answers nothing) or, with frozen false, resumes it. A
// frozen server is resumed when the test ends.
func (s *Server) Freeze(frozen bool) {
	s.tb.Helper()
	running, err := s.proc.Freeze(frozen, s.tb.Cleanup)
	if !running {
		s.tb.Fatal("redistest: Freeze of a stopped server")
	}
	if err != nil {
		s.tb.Fatal(err)
	}
}

// Restart starts a stopped server again on the same port, empty.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.tb.Fatal(err)
	}
}

func (s *Server) start() error {
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--loglevel", "warning", "--dir", s.dir)
	if s.sentinel != "" {
		// A sentinel rewrites its file as it learns the others: its own.
		conf := filepath.Join(s.dir, "sentinel.conf")
		body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n%s", s.port, s.dir, s.sentinel)
		if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
			return err
		}
		cmd = exec.Command("redis-server", conf, "--sentinel", "--loglevel", "warning")
	}
	return s.proc.Start(cmd, "redis-server", s.answers)
}

// answers waits until the server proc started answers PING.
func (s *Server) answers(proc *procstate.Proc) error {
	c := redisconn.New(s.Addr, "")
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-proc.Exited():
			return fmt.Errorf("redis-server on port %d exited at start (port taken?)", s.port)
		default:
		}
		// Dial first: go-redis logs every failed dial, and a starting
		// server refuses a few.
		if conn, err := net.Dial("tcp", s.Addr); err == nil {
			conn.Close()
			if c.Ping(context.Background()).Err() == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d did not answer PING within 10s", s.port)
		}
		time.Sleep(5 * time.Millisecond) // polling the observable state: PING
	}
}

// FreePort returns a loopback TCP port that was free when it was asked for;
// the tests start redis-server, the service and nginx on such ports.
func FreePort(tb testing.TB) int {
	tb.Helper()
	p, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// LoseReplies makes c lose the reply of the next n commands it sends whose
// name is one of names ("set", "evalsha", "eval", ...; any when none): Redis
// applies each one, and the caller gets a timeout, as when a network drops
// the reply. The client is real; only the reply is taken away.
func LoseReplies(c *redis.Client, n int, names ...string) {
	c.AddHook(&lostReplies{left: int64(n), names: names})
}

type lostReplies struct {
	left  int64
	mu    sync.Mutex
	names []string
}

func (h *lostReplies) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lostReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *lostReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil || !h.take(cmd.Name()) {
			return err
		}
		lost := fmt.Errorf("redistest: %s's reply lost: %w", cmd.Name(), os.ErrDeadlineExceeded)
		cmd.SetErr(lost)
		return lost
	}
}

// take reports whether the reply of a command named name is to be lost.
func (h *lostReplies) take(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.left <= 0 || (len(h.names) > 0 && !slices.Contains(h.names, name)) {
		return false
	}
	h.left--
	return true
}
