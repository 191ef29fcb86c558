package procstate

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Proc is a server process a test helper started (redis-server, etcd,
// ZooKeeper): killed as a crash would, frozen and resumed, and telling when
// it has exited.
type Proc struct {
	p      *os.Process
	exited chan struct{}
	group  bool // it leads a process group of its own (Setpgid): killed with it
}

// Start starts cmd and watches for its exit. A cmd started in a process
// group of its own (SysProcAttr.Setpgid: a server that starts others, as
// mariadbd may) is killed with its group.
func Start(cmd *exec.Cmd) (*Proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	group := cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid
	p := &Proc{p: cmd.Process, exited: make(chan struct{}), group: group}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.p.Pid }

// Exited is closed once the process has exited (at once for a nil Proc:
// one its holder killed).
func (p *Proc) Exited() <-chan struct{} {
	if p == nil {
		gone := make(chan struct{})
		close(gone)
		return gone
	}
	return p.exited
}

// Kill kills the process with SIGKILL (no clean shutdown: a crash) and waits
// until it has exited. A nil Proc (never started, or already killed by its
// holder) is nothing to kill.
func (p *Proc) Kill() {
	if p == nil {
		return
	}
	select {
	case <-p.exited: // reaped: its pid, and its group's, may be another's now
		return
	default:
	}
	if p.group {
		_ = syscall.Kill(-p.p.Pid, syscall.SIGKILL)
	} else {
		_ = p.p.Signal(syscall.SIGKILL)
	}
	<-p.exited
}

// Freeze stops the process until every thread is stopped (it answers
// nothing, its ports still accept connections) or, with frozen false,
// resumes it.
func (p *Proc) Freeze(frozen bool) error {
	if !frozen {
		return p.p.Signal(syscall.SIGCONT)
	}
	// Through the os.Process (a pidfd where there is one): never a pid
	// reused after this process was reaped.
	if err := p.p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return WaitStopped(p.p.Pid, 10*time.Second)
}
