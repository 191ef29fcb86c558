package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/locklab/locklab/internal/api"
	"github.com/locklab/locklab/internal/client"
)

// NodeHealth is a node as the page shows it: up (answering), down (refused
// or unreachable) or frozen (accepts, never answers: stopped, paused or cut
// off), and what it reported about itself.
type NodeHealth struct {
	Node
	State    string            `json:"state"`
	Detail   string            `json:"detail,omitempty"`
	Settings map[string]string `json:"settings,omitempty"`
}

// stack watches the stack's health: every node every second, each with a
// half-second deadline, so a node that stops answering shows within 2 s.
type stack struct {
	cfg      Config
	replicas func(context.Context) []string
	hub      *hub
	client   *http.Client // etcd's /health
	service  func() (*client.Client, error)
	cancel   context.CancelFunc
	done     chan struct{}

	mu   sync.Mutex
	last []NodeHealth
}

const (
	healthEvery   = time.Second
	healthTimeout = 500 * time.Millisecond
)

func newStack(cfg Config, h *hub, etcd *http.Client, replicas func(context.Context) []string, service func() (*client.Client, error)) *stack {
	ctx, cancel := context.WithCancel(context.Background())
	s := &stack{cfg: cfg, replicas: replicas, hub: h, client: etcd, service: service, cancel: cancel, done: make(chan struct{})}
	go s.watch(ctx)
	return s
}

func (s *stack) close() {
	s.cancel()
	<-s.done
}

func (s *stack) nodes() []NodeHealth {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.last)
}

func (s *stack) watch(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(healthEvery)
	defer tick.Stop()
	for {
		now := s.check(ctx)
		s.mu.Lock()
		changed := !slices.EqualFunc(now, s.last, func(a, b NodeHealth) bool {
			return a.Name == b.Name && a.State == b.State && a.Detail == b.Detail
		})
		s.last = now
		s.mu.Unlock()
		if changed {
			if data, err := json.Marshal(now); err == nil {
				s.hub.send(append(append([]byte("event: stack\ndata: "), data...), "\n\n"...))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// check asks every node at once.
func (s *stack) check(ctx context.Context) []NodeHealth {
	nodes := []Node{{Name: "nginx", Kind: "nginx"}}
	for _, r := range s.replicas(ctx) {
		nodes = append(nodes, Node{Name: r, Kind: "replica"})
	}
	nodes = append(nodes, s.cfg.Nodes...)
	out := make([]NodeHealth, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, healthTimeout)
			defer cancel()
			out[i] = s.probe(ctx, n)
		})
	}
	wg.Wait()
	return out
}

func (s *stack) probe(ctx context.Context, n Node) NodeHealth {
	h := NodeHealth{Node: n, State: "up"}
	var err error
	switch n.Kind {
	case "nginx":
		var svc *client.Client
		if svc, err = s.service(); err == nil {
			_, err = svc.Health(ctx)
		}
	case "replica":
		var svc *client.Client
		if svc, err = s.service(); err == nil {
			var health api.Health
			if health, err = svc.Replica(n.Name).Health(ctx); err == nil {
				h.Settings = health.Settings
			}
		}
	case "redis":
		err = pingRedis(ctx, n.Addr)
	case "etcd":
		_, err = s.get(ctx, "http://"+n.Addr+"/health")
	case "mariadb":
		err = hello(ctx, n.Addr, nil)
	case "zookeeper":
		err = zkServing(ctx, n.Addr)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		h.State, h.Detail = "frozen", "accepts no request within "+healthTimeout.String()
	default:
		h.State, h.Detail = "down", err.Error()
	}
	return h
}

func (s *stack) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	res, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, &statusError{res.Status}
	}
	return body, nil
}

type statusError struct{ status string }

func (e *statusError) Error() string { return "answered " + e.status }

// pingRedis sends PING and reads a reply: enough to tell up from down and
// frozen, with no password needed (an unauthenticated PING is answered with
// an error, which is an answer).
func pingRedis(ctx context.Context, addr string) error {
	return hello(ctx, addr, []byte("PING\r\n"))
}

// zkServing asks a ZooKeeper member srvr (a four-letter word): it answers
// with its mode while it serves clients, and that it is not serving when it
// has no quorum. The member closes the connection after its answer.
func zkServing(ctx context.Context, addr string) error {
	raw, err := exchange(ctx, addr, []byte("srvr"), func(c net.Conn) ([]byte, error) { return io.ReadAll(io.LimitReader(c, 64<<10)) })
	if err == nil && !strings.Contains(string(raw), "Mode: ") {
		return fmt.Errorf("not serving clients (no quorum): %s", strings.TrimSpace(string(raw)))
	}
	return err
}

// hello sends say to addr (nothing when nil) and waits for the first bytes
// of an answer: a MariaDB server greets every connection unasked, so an
// answer needs no credentials, and a frozen one sends nothing.
func hello(ctx context.Context, addr string, say []byte) error {
	_, err := exchange(ctx, addr, say, func(c net.Conn) ([]byte, error) {
		var b [64]byte
		n, err := c.Read(b[:])
		return b[:n], err
	})
	return err
}

// exchange connects to addr, sends say (if any) and reads the answer with
// read, all within ctx: a frozen server is ctx's error.
func exchange(ctx context.Context, addr string, say []byte, read func(net.Conn) ([]byte, error)) ([]byte, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(deadline)
	}
	if say != nil {
		if _, err := conn.Write(say); err != nil {
			return nil, err
		}
	}
	raw, err := read(conn)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return raw, err
}
