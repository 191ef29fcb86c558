package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/locklab/locklab/internal/procstate"
)

// envPrefix starts the service's own environment variables; passwordEnv
// and tokenEnv are the two that carry secrets.
const (
	envPrefix   = "INVENTORY_"
	passwordEnv = envPrefix + "REDIS_PASSWORD"
	tokenEnv    = envPrefix + "ADMIN_TOKEN"
	dbEnv       = envPrefix + "DB"
)

// Proc is one process the cluster started: what identifies it, and what
// starts it again.
type Proc struct {
	Name string `json:"name"` // redis-PORT, inventory-N, nginx
	Addr string `json:"addr"` // host:port it listens on
	Pid  int    `json:"pid"`
	// Started is when the process started, as the system reports it: with
	// the pid, what identifies it (a pid can be reused; the pair cannot).
	// Its command line cannot: redis-server and nginx rewrite theirs.
	Started string   `json:"started"`
	Args    []string `json:"args"` // how to start it again
	Env     []string `json:"env,omitempty"`
	Log     string   `json:"log"`
	// Extra are the other addresses it listens on (etcd's peer port, the
	// fault proxies' listeners): checked free at up and closed at down.
	Extra []string `json:"extra_addrs,omitempty"`
}

// start starts p as its own session (so it outlives the command that started
// it, and a terminal's ^C does not reach it), its output in p.Log, and sets
// p.Pid. A goroutine reaps it if it exits while this process still runs.
func (p *Proc) start(extra ...string) error {
	logf, err := openPrivate(p.Log, os.O_WRONLY|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := slices.Concat(p.Args, extra) // extra: this start only, never recorded
	cmd := exec.Command(args[0], args[1:]...)
	// The environment of whoever starts it, less the service's own
	// variables: p's are the ones it was first started with.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envPrefix) })
	cmd.Env = append(cmd.Env, p.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := startPrivate(cmd); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.Pid = cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	if p.Started, err = startTime(p.Pid); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	return nil
}

// umask serializes startPrivate's changes of the process's umask.
var umask sync.Mutex

// startPrivate starts cmd with the umask 077: whatever the process creates
// (nginx its pid file and temp directories, a Redis node its append-only
// files) is its owner's only. The umask is the whole process's, and a child
// inherits it at its start, so it is set around the start and put back.
func startPrivate(cmd *exec.Cmd) error {
	umask.Lock()
	defer umask.Unlock()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	return cmd.Start()
}

// alive reports whether p's pid is still the process the cluster started:
// same start time. A pid that exists but started at another time (a stale
// state file after a reboot) is not p, and is never signalled.
func (p Proc) alive() bool {
	if p.Pid <= 0 || p.Started == "" || syscall.Kill(p.Pid, 0) != nil || zombie(p.Pid) {
		return false
	}
	started, err := startTime(p.Pid)
	return err == nil && started == p.Started
}

// startTime is when pid started: from /proc where there is one (Linux: clock
// ticks since boot), from ps elsewhere (macOS).
func startTime(pid int) (string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// pid (comm) state ppid ... starttime is the 22nd field; comm may
		// hold spaces, so count from the last ')'.
		s := string(raw)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 20 {
			return "", fmt.Errorf("/proc/%d/stat: too few fields", pid)
		}
		return fields[19], nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	out, err := exec.Command("ps", "-o", "lstart=", "-p", strconv.Itoa(pid)).Output()
	return strings.TrimSpace(string(out)), err
}

// signal sends sig to p, after checking that p's pid is still p.
func (p Proc) signal(sig syscall.Signal) error {
	if !p.alive() {
		return fmt.Errorf("cluster: %s (pid %d) is not running the command the cluster started; not signalled", p.Name, p.Pid)
	}
	if err := syscall.Kill(p.Pid, sig); err != nil {
		return fmt.Errorf("cluster: %s %s (pid %d): %w", sig, p.Name, p.Pid, err)
	}
	return nil
}

// stop sends SIGTERM (and SIGCONT, in case it is frozen) and waits up to
// grace for p to exit, then kills it. It reports whether p was running.
func (p Proc) stop(grace time.Duration) (bool, error) {
	if !p.alive() {
		return false, nil
	}
	if err := p.signal(syscall.SIGTERM); err != nil {
		return true, err
	}
	_ = syscall.Kill(p.Pid, syscall.SIGCONT)
	if waitGone(p.Pid, grace) {
		return true, nil
	}
	_ = syscall.Kill(p.Pid, syscall.SIGKILL)
	if !waitGone(p.Pid, 5*time.Second) {
		return true, fmt.Errorf("cluster: %s (pid %d) survived SIGKILL", p.Name, p.Pid)
	}
	return true, nil
}

// waitGone waits until pid has exited (or is a zombie), for at most limit.
func waitGone(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		if syscall.Kill(pid, 0) != nil || zombie(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // polling the observable state: the pid
	}
}

// zombie reports whether pid has exited and awaits its parent's wait.
func zombie(pid int) bool {
	state, err := procstate.State(pid)
	return err == nil && state == 'Z'
}

// waitUntil polls ready, an observable state (a port, a PING), until it
// holds, for at most limit.
func waitUntil(ctx context.Context, limit time.Duration, what string, ready func() bool) error {
	deadline := time.Now().Add(limit)
	for !ready() {
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: %s: not ready within %s", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
