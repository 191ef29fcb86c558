package zk

import (
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Session is one ZooKeeper client session, shared by every acquisition of a
// replica: ZooKeeper's unit of liveness is the session, not the lock (a
// process, in the seed's words "会话断开自动删除"). The ephemeral nodes the
// locks create live exactly as long as the session that created them.
//
// The client (go-zookeeper) keeps one connection, reconnects on its own
// (to another member when one goes) and opens a new session when the old one
// expired; Session notes which session is current and closes its Ended
// channel when it expires, so the holds made in it know.
type Session struct {
	conn    *zk.Conn
	timeout time.Duration

	mu    sync.Mutex
	id    int64         // the current session, 0 before the first
	ended chan struct{} // closed when session id expires (or Close)
}

// SessionOptions configure a Session.
type SessionOptions struct {
	// Timeout: the members end the session, and delete its nodes, when they
	// hear nothing from it for that long. The members bound it (the local
	// cluster's and Compose's: 1 s to 60 s) and may grant less than asked;
	// the locks count the time asked, so keep it within those bounds.
	Timeout time.Duration
	Log     *slog.Logger // the client's own lines; nil: discard
	// Dialer, if not nil, makes the client's connections (the tests cut
	// them to partition a session away).
	Dialer zk.Dialer
}

// The client's buffers. go-zookeeper's default is 1.5 MiB each, receiving
// and sending, held for the session's life: 3 MiB of a replica's live heap,
// a fifth of it, for packets a lock never comes near. The largest reply is
// a listing of the lock's directory, a waiter's node name (about 60 bytes)
// each: RecvBuffer holds over 4,000 waiters, where a replica runs at most
// server.DefaultMaxInFlight sales at once; a reply beyond it is an error of
// that request, not a larger buffer. The largest request is a create with
// the owner's id as its data.
const (
	RecvBuffer = 256 << 10
	SendBuffer = 64 << 10
)

// Dial returns a session on the ensemble at servers (host:port). It does not
// wait for a member: the first request waits for the connection, and a
// request finds out under its own deadline.
func Dial(servers []string, opts SessionOptions) (*Session, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 20 * time.Second
	}
	s := &Session{timeout: opts.Timeout, ended: make(chan struct{})}
	if opts.Dialer == nil {
		opts.Dialer = net.DialTimeout
	}
	// The client's events may come before Connect returns: event waits for
	// s.conn under the lock.
	s.mu.Lock()
	defer s.mu.Unlock()
	conn, _, err := zk.Connect(servers, opts.Timeout, zk.WithLogInfo(false), zk.WithLogger(logger{opts.Log}),
		zk.WithEventCallback(s.event), zk.WithDialer(opts.Dialer),
		zk.WithMaxBufferSize(RecvBuffer), zk.WithMaxConnBufferSize(SendBuffer))
	if err != nil {
		return nil, fmt.Errorf("zk: client of %v: %w", servers, err)
	}
	s.conn = conn
	return s, nil
}

// event follows the session: a new one starts (the first, or the one the
// client opens after an expiry), the current one expires. The client calls
// it from its own goroutine, in order.
func (s *Session) event(e zk.Event) {
	if e.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.State {
	case zk.StateHasSession:
		if id := s.conn.SessionID(); id != s.id {
			if s.id != 0 {
				closeOnce(s.ended)
			}
			s.id, s.ended = id, make(chan struct{})
		}
	case zk.StateExpired:
		closeOnce(s.ended)
	}
}

// current is the session as this process knows it now: its id (0 before the
// first) and the channel closed when it ends.
func (s *Session) current() (int64, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id, s.ended
}

// Timeout is the session's timeout, as asked.
func (s *Session) Timeout() time.Duration { return s.timeout }

// Close ends the session: the members delete its nodes at once.
func (s *Session) Close() {
	s.conn.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	closeOnce(s.ended)
}

func closeOnce(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

// logger puts the client's own lines (a member it cannot reach, a
// connection lost) in the service's log.
type logger struct{ log *slog.Logger }

func (l logger) Printf(format string, args ...any) {
	l.log.Warn("zookeeper client", "msg", fmt.Sprintf(format, args...))
}
