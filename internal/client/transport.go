package client

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// transport sends requests over fasthttp, not net/http: on a 2-core machine
// the load generator shares the CPU with nginx and the replicas, and
// fasthttp's client does each request in the calling goroutine (net/http runs
// two goroutines per connection). Measured against the local cluster, 64
// callers, 5 s each (issue 47): GET /healthz through nginx 1.12-1.59x the
// requests/s of net/http, POST /sale?lock=atomic 1.33-1.53x, v6 0.97-1.16x
// (its lock is the bottleneck). make bench-loadtest compares it with wrk.
//
// fasthttp takes no context, so a request runs on a lane: a fasthttp client
// with one connection per host, used by one request at a time, whose
// connections it dialled are known. A context that ends while its request is
// in flight closes that lane's connections (the service sees its client go)
// and the lane is thrown away; the others run on.
type transport struct {
	mu   sync.Mutex
	free []*lane
}

// lane is one fasthttp client of one connection per host.
type lane struct {
	c         *fasthttp.Client
	cancelled atomic.Bool
	mu        sync.Mutex
	conns     map[*conn]struct{}
}

// conn is a connection a lane dialled, forgotten once closed.
type conn struct {
	net.Conn
	l *lane
}

func (c *conn) Close() error {
	c.l.mu.Lock()
	delete(c.l.conns, c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// dead says that the server closed c while it sat idle in its lane: a read
// that would block means it is alive (nothing is due on an idle HTTP
// connection); EOF, an error, or bytes nobody asked for mean it is not. One
// non-blocking read, as go-sql-driver/mysql checks a pooled connection.
func (c *conn) dead() bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var rerr error
	var buf [1]byte
	if err := rc.Read(func(fd uintptr) bool {
		_, rerr = syscall.Read(int(fd), buf[:])
		return true // never wait: the answer is now
	}); err != nil {
		return true
	}
	return !errors.Is(rerr, syscall.EAGAIN)
}

// dropDead closes the lane's idle connections when the server closed one
// (a replica restarted, nginx reloaded): fasthttp would send the next
// request on it and, a POST, not send it again once it failed, where
// net/http notices a closed idle connection and dials anew. The lane is
// its caller's alone, so every connection it holds is idle.
func (l *lane) dropDead() {
	l.mu.Lock()
	dead := false
	for c := range l.conns {
		if c.dead() {
			dead = true
			break
		}
	}
	l.mu.Unlock()
	if dead {
		l.c.CloseIdleConnections()
	}
}

func newLane() *lane {
	l := &lane{conns: map[*conn]struct{}{}}
	l.c = &fasthttp.Client{
		MaxConnsPerHost:          1,
		NoDefaultUserAgentHeader: true,
		// Within the request's timeout (which a context's deadline sets):
		// a dial to a host that answers nothing is not waited on longer.
		DialTimeout: func(addr string, timeout time.Duration) (net.Conn, error) {
			c, err := fasthttp.DialTimeout(addr, timeout)
			if err != nil {
				return nil, err
			}
			tc := &conn{Conn: c, l: l}
			l.mu.Lock()
			l.conns[tc] = struct{}{}
			l.mu.Unlock()
			return tc, nil
		},
		// fasthttp's own rule (a request that changes nothing, or the
		// same thing again, is sent again on a connection that failed),
		// but never once its context ended.
		RetryIfErr: func(req *fasthttp.Request, _ int, _ error) (bool, bool) {
			return false, !l.cancelled.Load() && (req.Header.IsGet() || req.Header.IsHead() || req.Header.IsPut())
		},
	}
	return l
}

// abort closes every connection of the lane: the request in flight on one
// fails at once.
func (l *lane) abort() {
	l.cancelled.Store(true)
	l.mu.Lock()
	conns := make([]*conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

func (t *transport) take() *lane {
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.free); n > 0 {
		l := t.free[n-1]
		t.free = t.free[:n-1]
		return l
	}
	return newLane()
}

// do sends req and reads resp within ctx and timeout.
func (t *transport) do(ctx context.Context, req *fasthttp.Request, resp *fasthttp.Response, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctxDeadline := false // the timeout is ctx's deadline
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout, ctxDeadline = time.Until(d), true
	}
	l := t.take()
	l.dropDead()
	stop := context.AfterFunc(ctx, l.abort)
	err := l.c.DoTimeout(req, resp, timeout)
	if !stop() { // ctx ended: the lane's connections are closed or closing
		l.c.CloseIdleConnections()
		return ctx.Err()
	}
	t.mu.Lock()
	t.free = append(t.free, l)
	t.mu.Unlock()
	if ctxDeadline && errors.Is(err, fasthttp.ErrTimeout) { // fasthttp's clock came first
		return context.DeadlineExceeded
	}
	return err
}

// close closes the idle connections of every lane.
func (t *transport) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.free {
		l.c.CloseIdleConnections()
	}
}
