// Package zk is the ZooKeeper family of seed 004 ("临时顺序节点"): a lock on
// a three-member ZooKeeper ensemble, through the seed's recipe, written here
// on go-zookeeper's client.
//
// Each acquisition creates an ephemeral sequential node under the lock's
// directory; the node with the lowest sequence number holds the lock, and
// each waiter watches only the node just before its own (no herd: a release
// wakes one waiter), so waiting is ZooKeeper's, in arrival order. The node
// lives as long as the replica's session (Session): a holder that dies
// frees the lock when its session times out. The fencing token is the
// node's creation zxid: ZooKeeper's transaction id, cluster-wide, and
// larger for every later holder.
//
// Not copied from the seed: its Lock creates the node and, if the reply is
// lost (a member gone mid-request), returns the error with the node possibly
// made, held for nobody until the session ends: on a replica's session,
// which lives as long as the replica, for ever. Here every node's name
// starts with an id of its own attempt, so an attempt whose create was
// ambiguous finds its node again; and an attempt that stops waiting (its
// deadline, an error) deletes its node, tried again until it is gone. The
// seed waits with no deadline, reads a watch that ended by disconnection as
// a deletion, and fails when the lock's directory is missing; here the wait
// ends with the request, a watch's end only means "look again", and the
// directory is made. And the holder learns when its session may have ended
// (Lost), which the seed's never does.
//
// What it fixes: a majority decides (ZAB), so a member's failure loses
// neither the lock nor a token, and a dead holder frees the lock by itself.
// What it does not fix: a holder paused past its session timeout (a GC
// pause, SIGSTOP) loses its node while it still believes it holds the lock,
// and writes anyway, unless the storage checks its token. And it is not
// reentrant: a holder that asks again queues behind itself.
package zk

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/locklab/locklab/internal/chaos"
	"github.com/locklab/locklab/internal/lease"
	"github.com/locklab/locklab/internal/step"
)

// Options configure a Locker. The zero value is the lock "lock".
type Options struct {
	Key   string // the lock's name: its directory is /locklab/Key
	Fence bool   // hand out the holder's node's creation zxid as its token
}

// Locker is a ZooKeeper lock, safe for concurrent use.
type Locker struct {
	s     *Session
	dir   string
	fence bool
}

// New returns a Locker on the session s.
func New(s *Session, opts Options) *Locker {
	if opts.Key == "" {
		opts.Key = "lock"
	}
	return &Locker{s: s, dir: "/locklab/" + opts.Key, fence: opts.Fence}
}

// Dir is the lock's directory: its waiters' nodes are its children.
func (l *Locker) Dir() string { return l.dir }

// Acquire waits for the lock until ctx ends: its node joins the queue, and
// it waits for the nodes before it to go. The lease is lost (Lost closed)
// at the session's deadline, counted from the last request the holder sent
// that found its node, or when the session is known to have expired. A
// nested acquisition by the same owner is a new node, behind its own.
func (l *Locker) Acquire(ctx context.Context, owner string) (lease.Lease, error) {
	return l.acquire(ctx, owner, true)
}

// TryAcquire makes one attempt: the lock, or lease.ErrTaken at once (its
// node deleted) when another node is before its own.
func (l *Locker) TryAcquire(ctx context.Context, owner string) (lease.Lease, error) {
	return l.acquire(ctx, owner, false)
}

// acquire makes attempts until one obtains the lock, finds it taken (not
// wait), fails, or ctx ends. An attempt whose session expired (its node
// gone with it, or never made) is not an outage: the client opens a new
// session at once, and the next attempt queues in it (a replica paused past
// its session timeout comes back to exactly that).
func (l *Locker) acquire(ctx context.Context, owner string, wait bool) (lease.Lease, error) {
	for {
		held, err := l.attempt(ctx, owner, wait)
		if !errors.Is(err, zk.ErrSessionExpired) || ctx.Err() != nil {
			return held, err
		}
		select {
		case <-ctx.Done():
			return nil, l.failed(ctx, "wait for a new session", ctx.Err())
		case <-time.After(10 * time.Millisecond): // the client's reconnection, not a poll of the lock
		}
	}
}

// attempt is one place in the queue: its node made, then held or waited on.
func (l *Locker) attempt(ctx context.Context, owner string, wait bool) (lease.Lease, error) {
	id, err := attemptID()
	if err != nil {
		return nil, err
	}
	m, err := gated(ctx, fmt.Sprintf("create %s/%s-lock- %q ephemeral sequential", l.dir, id, owner), func() (made, error) {
		node, session, ended, err := l.create(ctx, id, owner)
		return made{node, session, ended}, err
	})
	node, session, ended := m.node, m.session, m.ended
	if err != nil {
		return nil, l.failed(ctx, "create a node", err)
	}
	// lesson:begin zk
	for {
		sent := time.Now()
		children, err := call(ctx, "getChildren "+l.dir, func() ([]string, error) {
			c, _, err := l.s.conn.Children(l.dir)
			return c, err
		})
		if err != nil {
			l.abandon(node, id, session)
			return nil, l.failed(ctx, "list the waiters", err)
		}
		queue := order(children)
		mine := slices.Index(queue, node[len(l.dir)+1:])
		switch {
		case mine < 0: // deleted with its session, or by hand
			return nil, l.failed(ctx, "find its node", fmt.Errorf("%s is gone (its session ended): %w", node, zk.ErrSessionExpired))
		case mine == 0:
			return l.held(ctx, node, session, ended, sent)
		case !wait:
			l.abandon(node, id, session)
			return nil, lease.ErrTaken
		}
		before := l.dir + "/" + queue[mine-1]
		watch, err := call(ctx, "exists "+before+" watch", func() (<-chan zk.Event, error) {
			exists, _, watch, err := l.s.conn.ExistsW(before)
			if err == nil && !exists {
				return nil, nil
			}
			return watch, err
		})
		if err != nil {
			l.abandon(node, id, session)
			return nil, l.failed(ctx, "watch the node before its own", err)
		}
		if watch == nil { // gone between the two reads: look again
			continue
		}
		watch = deaf(ctx, watch)
		// The node before goes (released, or its session ended), or the
		// watch ends with the connection: either way, look again.
		select {
		case <-watch:
		case <-ended:
		case <-ctx.Done():
			l.abandon(node, id, session)
			return nil, l.failed(ctx, "wait", ctx.Err())
		}
	}
	// lesson:end
}

// deaf is watch, the real watch on the node before the waiter's own, unless
// the waiter's request switched its wake-up off (chaos.Off.Wake, make
// mutations' lost-wakeup): then its event, the node's deletion, is read and
// dropped, and the waiter is told nothing (the channel returned never
// delivers). It waits, with the lock free, until its deadline, or until its
// session ends.
func deaf(ctx context.Context, watch <-chan zk.Event) <-chan zk.Event {
	if !chaos.From(ctx).Off.Wake {
		return watch
	}
	go func() { <-watch }() // a watch fires once: at the event, or when the connection closes
	return nil
}

// made is what create made: its reply, as the step-through shows it, is the
// node's path.
type made struct {
	node    string
	session int64
	ended   <-chan struct{}
}

func (m made) path() string { return m.node }

// create makes the attempt's node, named after its id (so that a create
// whose reply was lost can find it again), with owner as its data, in the
// lock's directory (made when missing). It returns the node's path and the
// session it belongs to. When ctx ends first, the node the create makes is
// deleted once it is made.
func (l *Locker) create(ctx context.Context, id, owner string) (node string, session int64, ended <-chan struct{}, err error) {
	prefix := l.dir + "/" + id + "-lock-"
	type made struct {
		node    string
		session int64
		ended   <-chan struct{}
		err     error
	}
	done := make(chan made, 1)
	go func() {
		session, ended := l.s.current()
		// lesson:begin zk
		node, err := l.s.conn.Create(prefix, []byte(owner), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		// lesson:end
		for errors.Is(err, zk.ErrNoServer) && pause(ctx) { // never sent: try again
			session, ended = l.s.current()
			node, err = l.s.conn.Create(prefix, []byte(owner), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
		}
		if errors.Is(err, zk.ErrNoNode) { // the directory is missing
			if err = l.makeDir(); err == nil {
				session, ended = l.s.current()
				node, err = l.s.conn.Create(prefix, []byte(owner), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
			}
		}
		if errors.Is(err, zk.ErrConnectionClosed) { // sent, reply lost: look for it
			if node, err = l.find(id); err != nil && !errors.Is(err, zk.ErrNoNode) {
				l.abandon("", id, session) // it may be there: look until known
			}
		}
		now, nowEnded := l.s.current()
		switch {
		case err != nil:
		case session == 0: // the first session began during the create: the node is its
			session, ended = now, nowEnded
		case now != session:
			// A session began meanwhile: the node may be the old one's (gone
			// with it) or the new one's; either way, start again.
			l.abandon(node, id, now)
			err = fmt.Errorf("the session changed during the create: %w", zk.ErrSessionExpired)
		}
		done <- made{node, session, ended, err}
	}()
	select {
	case m := <-done:
		return m.node, m.session, m.ended, m.err
	case <-ctx.Done():
		go func() {
			if m := <-done; m.err == nil {
				l.abandon(m.node, id, m.session)
			}
		}()
		return "", 0, nil, ctx.Err()
	}
}

// find looks for the node an attempt made (its name starts with id): its
// path, or zk.ErrNoNode when there is none.
func (l *Locker) find(id string) (string, error) {
	children, _, err := l.s.conn.Children(l.dir)
	if err != nil {
		return "", err
	}
	for _, c := range children {
		if strings.HasPrefix(c, id+"-") {
			return l.dir + "/" + c, nil
		}
	}
	return "", zk.ErrNoNode
}

// makeDir makes the lock's directory and its parents, persistent.
func (l *Locker) makeDir() error {
	path := ""
	for _, part := range strings.Split(strings.TrimPrefix(l.dir, "/"), "/") {
		path += "/" + part
		if _, err := l.s.conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// held is the lease of the node found first in the queue by a request sent
// at sent: valid until the session's timeout from then, renewed by the
// holder's own reads while it holds (see keep).
func (l *Locker) held(ctx context.Context, node string, session int64, ended <-chan struct{}, sent time.Time) (lease.Lease, error) {
	// A stepped sale's lease counts from the read as the learner let it go,
	// not from before the gate (step.Sent): time stopped there is not the
	// lease's.
	valid := lease.NewDeadline(lease.ValidUntil(step.Sent(ctx, sent), l.s.timeout), nil)
	stop := l.keep(node, session, ended, valid)
	var token int64
	if l.fence {
		stat, err := call(ctx, "exists "+node, func() (*zk.Stat, error) {
			exists, stat, err := l.s.conn.Exists(node)
			if err == nil && !exists {
				err = fmt.Errorf("%s is gone: %w", node, zk.ErrNoNode)
			}
			return stat, err
		})
		if err != nil {
			stop()
			l.abandon(node, "", session)
			return nil, l.failed(ctx, "read the token", err)
		}
		token = stat.Czxid
	}
	release := func(ctx context.Context) error {
		stop()
		return l.release(ctx, node, session)
	}
	return lease.Timed(release, token, valid), nil
}

// keep keeps the hold's validity while it lasts: every third of the
// session's timeout (a hold shorter than that, every sale at normal speed,
// sends nothing) it reads its node, and a read that finds it moves the
// deadline to the timeout from the read's sending; a read that finds it gone,
// or the session's end, loses the lease at once. The client's own pings keep
// the session alive; they do not tell this holder when they were answered.
func (l *Locker) keep(node string, session int64, ended <-chan struct{}, valid *lease.Deadline) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(l.s.timeout / 3)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-valid.Lost():
				return
			case <-ended:
				valid.Lose()
				return
			case <-tick.C:
			}
			sent := time.Now()
			exists, _, err := l.s.conn.Exists(node)
			now, _ := l.s.current()
			switch {
			case err == nil && exists && now == session:
				valid.Extend(lease.ValidUntil(sent, l.s.timeout))
			case err == nil:
				valid.Lose()
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		valid.Stop()
	}
}

// release deletes the holder's node: lease.ErrNotHeld when it was gone
// already (its session ended: the lock was lost). When the delete fails
// otherwise, it is tried again in the background until the node is gone.
func (l *Locker) release(ctx context.Context, node string, session int64) error {
	// lesson:begin zk
	_, err := call(ctx, "delete "+node, func() (struct{}, error) { return struct{}{}, l.s.conn.Delete(node, -1) })
	// lesson:end
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return fmt.Errorf("zk: release %s: %w", node, lease.ErrNotHeld)
	case err != nil:
		l.abandon(node, "", session)
		return fmt.Errorf("zk: release %s: %w", node, err)
	}
	return nil
}

// abandon deletes an attempt's node (node, or when "" the one whose name
// starts with id, if any) in the background, tried again until it is gone,
// its session has ended (which deleted it), or the client is closed: a node
// left behind would hold the queue for nobody as long as the replica's
// session lives.
func (l *Locker) abandon(node, id string, session int64) {
	go func() {
		for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
			path, err := node, error(nil)
			if path == "" {
				path, err = l.find(id)
			}
			if err == nil {
				err = l.s.conn.Delete(path, -1)
			}
			now, ended := l.s.current()
			if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrClosing) || now != session {
				return
			}
			select {
			case <-ended:
				return
			case <-time.After(wait):
			}
		}
	}()
}

// failed is an acquisition's error: the context's cause when it ended (a
// deadline: the sale answers lock_timeout), else ZooKeeper's (no quorum, no
// member reachable: unavailable).
func (l *Locker) failed(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("lock not obtained (zk: %s in %s): %w", what, l.dir, context.Cause(ctx))
	}
	return fmt.Errorf("zk: %s in %s: %w", what, l.dir, err)
}

// order sorts the waiters' nodes by their sequence numbers, the order
// ZooKeeper made them in. (The seed sorts the names themselves: right for
// its names, wrong for these, which start with their attempt's id.) Names
// without one are not waiters and are left out.
func order(children []string) []string {
	type waiter struct {
		name string
		seq  int64
	}
	var ws []waiter
	for _, c := range children {
		i := strings.LastIndex(c, "-lock-")
		if i < 0 {
			continue
		}
		seq, err := strconv.ParseInt(c[i+len("-lock-"):], 10, 64)
		if err != nil {
			continue
		}
		ws = append(ws, waiter{c, seq})
	}
	slices.SortFunc(ws, func(a, b waiter) int { return cmp.Compare(a.seq, b.seq) })
	names := make([]string, len(ws))
	for i, w := range ws {
		names[i] = w.name
	}
	return names
}

// attemptID is a random id for one attempt's node.
func attemptID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}
