package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/locklab/locklab/internal/probe"
	"github.com/locklab/locklab/internal/procstate"
	"github.com/locklab/locklab/internal/redisconn"
	"github.com/redis/go-redis/v9"
)

// Freeze stops the named process with SIGSTOP (it answers nothing and keeps
// its state: a long GC pause, a frozen VM) or, with frozen false, resumes it.
func (c *Cluster) Freeze(name string, frozen bool) error {
	p, err := c.proc(name)
	if err != nil {
		return err
	}
	if frozen {
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return err
		}
		return procstate.WaitStopped(p.Pid, 10*time.Second)
	}
	return p.signal(syscall.SIGCONT)
}

// Stopped reports whether the named process is stopped, every thread of it
// (SIGSTOP, by Freeze or by itself).
func (c *Cluster) Stopped(name string) (bool, error) {
	p, err := c.proc(name)
	if err != nil {
		return false, err
	}
	if !p.alive() {
		return false, fmt.Errorf("cluster: %s is not running", name)
	}
	return procstate.Stopped(p.Pid)
}

// Kill kills the named process with SIGKILL, as a crash would (no release,
// no watchdog stop), and returns what starts it again as it was (same
// arguments, environment and log; a Redis node comes back empty) and waits
// until it answers.
func (c *Cluster) Kill(name string) (restart func(context.Context) error, err error) {
	return c.stop(name, syscall.SIGKILL, 10*time.Second)
}

// Terminate stops the process name with SIGTERM, as `docker stop` does: a
// replica cancels the sales waiting for the lock and lets the holders finish.
// restart waits until it has exited (its grace period is seconds), then
// starts it again.
func (c *Cluster) Terminate(name string) (restart func(context.Context) error, err error) {
	return c.stop(name, syscall.SIGTERM, 30*time.Second)
}

// KillWith is Kill, and restart starts the process with extra arguments
// after its own (a Redis node that comes back with persistence on, say);
// the state keeps only its own, so a later restart drops them. Restarts may
// run at once; nothing else of a Cluster may run beside them.
func (c *Cluster) KillWith(name string, extra ...string) (restart func(context.Context) error, err error) {
	return c.stop(name, syscall.SIGKILL, 10*time.Second, extra...)
}

func (c *Cluster) stop(name string, sig syscall.Signal, limit time.Duration, extra ...string) (restart func(context.Context) error, err error) {
	p, err := c.proc(name)
	if err != nil {
		return nil, err
	}
	if err := p.signal(sig); err != nil {
		return nil, err
	}
	pid := p.Pid
	return func(ctx context.Context) error {
		if !waitGone(pid, limit) {
			return fmt.Errorf("cluster: %s (pid %d) did not exit within %s of %s", name, pid, limit, sig)
		}
		return c.restart(ctx, p, extra...)
	}, nil
}

func (c *Cluster) proc(name string) (*Proc, error) {
	for _, p := range c.State.procs() {
		if p.Name == name {
			return p, nil
		}
	}
	return nil, fmt.Errorf("cluster: no process %q", name)
}

// restart starts p again and waits until it answers. The killed process's
// port is free once the kernel has reaped it, so a start that exits at once
// (the port still taken) is tried again.
func (c *Cluster) restart(ctx context.Context, p *Proc, extra ...string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.restarting.Lock()
		err := p.start(extra...)
		c.restarting.Unlock()
		if err != nil {
			return err
		}
		if err = c.ready(ctx, p, 2*time.Second); err == nil {
			c.restarting.Lock()
			defer c.restarting.Unlock()
			return c.save()
		}
		if p.alive() || time.Now().After(deadline) {
			// Running but not answering is still running: the state must
			// know its pid, or down would leave it behind.
			c.restarting.Lock()
			defer c.restarting.Unlock()
			return errors.Join(fmt.Errorf("cluster: %s did not come back: %w", p.Name, err), c.save())
		}
	}
}

// ready waits until p answers: PING for a Redis node, /readyz for a replica,
// /healthz through it for nginx.
func (c *Cluster) ready(ctx context.Context, p *Proc, limit time.Duration) error {
	switch {
	case p.Name == "nginx":
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && answers(ctx, p.Addr, false) })
	case p.Name == "toxiproxy": // its API answers and every proxy listens
		return waitUntil(ctx, limit, p.Name, func() bool {
			if !p.alive() || !httpOK(ctx, "http://"+p.Addr+"/version") {
				return false
			}
			return !slices.ContainsFunc(p.Extra, func(a string) bool { return !listening(a) })
		})
	case p.Name == "mariadb":
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && dbReady(ctx, c.dir) })
	case strings.HasPrefix(p.Name, "zookeeper"): // serving: in a quorum
		return waitUntil(ctx, limit, p.Name, func() bool {
			_, err := probe.ZKMode(p.Addr, time.Second)
			return p.alive() && err == nil
		})
	case strings.HasPrefix(p.Name, "etcd"): // healthy: the member has a leader
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && httpOK(ctx, "http://"+p.Addr+"/health") })
	case strings.HasPrefix(p.Name, "sentinel"):
		rdb := redis.NewSentinelClient(redisconn.Options(p.Addr, c.State.RedisPassword))
		defer rdb.Close()
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && listening(p.Addr) && rdb.Ping(ctx).Err() == nil })
	case strings.HasPrefix(p.Name, "redis"):
		rdb := redisconn.New(p.Addr, c.State.RedisPassword)
		defer rdb.Close()
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && listening(p.Addr) && rdb.Ping(ctx).Err() == nil })
	default:
		return waitUntil(ctx, limit, p.Name, func() bool { return p.alive() && answers(ctx, p.Addr, true) })
	}
}
